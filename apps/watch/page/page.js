// conveyor's live page: renders the /api/status JSON (apps/watch/status_json.hpp) each
// time /api/events sends it. Charts through Chart.js when /static/chart.js loaded; without
// it the page says so and shows everything else. What a test reads is mirrored into data-
// attributes: body[data-updates], #step[data-step], #loss-chart[data-points], the stage
// rows' data-stage/-device/-node.
'use strict';

const el = (id) => document.getElementById(id);
const dash = '–';
const kTimelinePeriodMs = 10000;  // the server draws a trace at most every 5 s anyway
const kMaxRatePoints = 2000;

function num(v, digits = 4) {
  return v === null || v === undefined ? dash : Number(v).toPrecision(digits);
}
function pct(v) {
  return v === null || v === undefined ? dash : (100 * v).toFixed(1) + '%';
}
function seconds(s) {
  if (s === null || s === undefined) return dash;
  if (s < 90) return Math.round(s) + ' s';
  if (s < 5400) return Math.round(s / 60) + ' min';
  return (s / 3600).toFixed(1) + ' h';
}
function setText(id, text) {
  const e = el(id);
  if (e.textContent !== text) e.textContent = text;
}

// ---- charts ----
const charts = { loss: null, rate: null };
const rateHistory = [];  // [step, tokens/s] as this page saw them

function chartAvailable() {
  return typeof window.Chart !== 'undefined' && !window.chartJsMissing;
}

function lineChart(canvas, datasets, yTitle) {
  return new window.Chart(canvas, {
    type: 'line',
    data: { datasets },
    options: {
      animation: false,
      responsive: true,
      maintainAspectRatio: false,
      parsing: false,
      normalized: true,
      elements: { point: { radius: 0 }, line: { borderWidth: 1.5 } },
      scales: {
        x: { type: 'linear', title: { display: true, text: 'step' } },
        y: { title: { display: true, text: yTitle } },
      },
      plugins: { legend: { display: datasets.length > 1 } },
    },
  });
}

function setupCharts() {
  const status = el('chart-status');
  if (!chartAvailable()) {
    status.hidden = false;
    status.className = 'note warn';
    status.dataset.chart = 'missing';
    status.textContent = 'Charts need Chart.js, which this server could not serve (/static/chart.js): ' +
        'install Debian\'s libjs-chart.js on the machine that serves this page, or set CONVEYOR_CHART_JS ' +
        'to the file. The numbers above and below do not need it.';
    return;
  }
  status.dataset.chart = 'ok';
  charts.loss = lineChart(el('loss-chart'), [
    { label: 'loss', data: [], borderColor: '#4a7bd0', backgroundColor: '#4a7bd0' },
    { label: 'eval loss', data: [], borderColor: '#d0704a', backgroundColor: '#d0704a', pointRadius: 3 },
  ], 'loss');
  charts.rate = lineChart(el('rate-chart'), [
    { label: 'tokens/s', data: [], borderColor: '#5aa05a', backgroundColor: '#5aa05a' },
  ], 'tokens/s');
}

function points(curve) {
  return curve.map(([step, value]) => ({ x: step + 1, y: value }));  // steps done, as the counter
}

function updateCharts(s) {
  const loss = s.curves.loss, evalLoss = s.curves.eval_loss;
  const canvas = el('loss-chart');
  canvas.dataset.points = String(loss.length);
  canvas.dataset.evalPoints = String(evalLoss.length);
  if (s.last_step) {
    const step = s.last_step.step + 1;
    const last = rateHistory[rateHistory.length - 1];
    if (!last || last[0] !== step) rateHistory.push([step, s.last_step.tokens_per_s]);
    if (rateHistory.length > kMaxRatePoints) rateHistory.splice(0, rateHistory.length - kMaxRatePoints);
  }
  el('rate-chart').dataset.points = String(rateHistory.length);
  if (!charts.loss) return;
  charts.loss.data.datasets[0].data = points(loss);
  charts.loss.data.datasets[1].data = points(evalLoss);
  charts.loss.update('none');
  charts.rate.data.datasets[0].data = rateHistory.map(([x, y]) => ({ x, y }));
  charts.rate.update('none');
}

// ---- tables ----
function replaceRows(tbody, rows) {
  const frag = document.createDocumentFragment();
  for (const r of rows) frag.appendChild(r);
  tbody.replaceChildren(frag);
}

function cell(tr, text) {
  const td = document.createElement('td');
  td.textContent = text;
  tr.appendChild(td);
  return td;
}

function renderStages(s) {
  const alive = new Map(s.nodes.map((n) => [n.node, n.alive]));
  const rows = s.stages.map((st) => {
    const tr = document.createElement('tr');
    tr.dataset.stage = String(st.stage);
    tr.dataset.device = st.device;
    tr.dataset.node = String(st.node);
    cell(tr, String(st.stage));
    cell(tr, String(st.pipeline_stage));
    cell(tr, String(st.replica));
    cell(tr, st.device);
    cell(tr, String(st.node) + (alive.get(st.node) === false ? ' (down)' : ''));
    const busy = cell(tr, '');
    if (st.busy_ratio !== null) {
      const bar = document.createElement('span');
      bar.className = 'busy';
      bar.style.width = Math.round(100 * Math.min(1, st.busy_ratio)) + 'px';
      busy.appendChild(bar);
      busy.appendChild(document.createTextNode(pct(st.busy_ratio)));
    } else {
      busy.textContent = dash;
    }
    return tr;
  });
  replaceRows(el('stages').tBodies[0], rows);
}

function renderEvents(s) {
  const events = s.events;
  el('events').hidden = events.length === 0;
  const totals = Object.entries(s.recoveries.total).filter(([, n]) => n > 0).map(([k, n]) => n + ' ' + k);
  setText('events-note', events.length === 0 ? 'none' :
      'recoveries: ' + (totals.length ? totals.join(', ') : 'none') + '; newest first');
  const rows = events.slice().reverse().map((e) => {
    const tr = document.createElement('tr');
    tr.dataset.kind = e.kind;
    cell(tr, e.step === null ? dash : String(e.step));
    cell(tr, e.kind);
    cell(tr, e.detail);
    return tr;
  });
  replaceRows(el('events').tBodies[0], rows);
}

function renderSample(s) {
  const pre = el('sample');
  if (!s.sample) return;
  pre.hidden = false;
  pre.dataset.step = String(s.sample.step);
  setText('sample-note', 'after step ' + (s.sample.step + 1) + (s.sample.prompt ? ', prompt "' + s.sample.prompt + '"' : '') + ':');
  setText('sample', s.sample.text);
}

// ---- the timeline ----
let timelineStep = -1, timelineAt = 0, timelineUrl = null;

async function refreshTimeline(step) {
  const now = Date.now();
  if (step === timelineStep || now - timelineAt < kTimelinePeriodMs) return;
  timelineStep = step;
  timelineAt = now;
  try {
    const res = await fetch('/api/timeline.svg', { cache: 'no-store' });
    if (!res.ok) {
      setText('timeline-note', (await res.text()).replace(/^404 not found: /, '').trim());
      return;
    }
    const url = URL.createObjectURL(await res.blob());
    const img = el('timeline');
    img.onload = () => { if (timelineUrl) URL.revokeObjectURL(timelineUrl); timelineUrl = url; };
    img.src = url;
    img.hidden = false;
    setText('timeline-note', '');
  } catch (e) {
    setText('timeline-note', 'the timeline could not be fetched: ' + e);
  }
}

// ---- the whole status ----
function describeJob(s) {
  const m = s.job.model;
  const parts = [];
  if (s.run) parts.push('run ' + s.run);
  let model = m.arch || 'model';
  if (m.layers !== null) model += ', ' + m.layers + ' layers';
  if (m.d_model !== null) model += ', d_model ' + m.d_model;
  parts.push(model);
  parts.push((s.job.schedule || '?') + ', ' + s.job.stages + ' stage(s) × ' + s.job.micro_batches +
      ' micro-batches' + (s.job.data_parallel > 1 ? ', ' + s.job.data_parallel + ' replicas' : ''));
  if (s.job.devices) parts.push(s.job.devices);
  return parts.join(' · ');
}

function render(s) {
  document.body.dataset.updates = String(Number(document.body.dataset.updates) + 1);
  const state = el('state');
  state.textContent = s.state;
  state.className = 'state ' + s.state;
  setText('job', describeJob(s));
  document.title = 'conveyor · ' + (s.run ? s.run + ' · ' : '') + 'step ' + s.step + (s.steps ? ' of ' + s.steps : '');
  const step = el('step');
  step.dataset.step = String(s.step);
  setText('step', String(s.step));
  setText('steps', s.steps === null ? dash : String(s.steps));
  setText('eta', seconds(s.eta_s));
  el('bar-fill').style.width = s.steps ? Math.min(100, 100 * s.step / s.steps).toFixed(1) + '%' : '0%';
  setText('loss', s.last_step ? num(s.last_step.loss) : dash);
  setText('eval-loss', num(s.eval_loss));
  setText('tokens', s.last_step ? Math.round(s.last_step.tokens_per_s).toLocaleString('en') : dash);
  setText('mfu', s.model_flops_utilization === null ? (s.last_step ? 'n/a (CPU)' : dash) : pct(s.model_flops_utilization));
  setText('bubble', pct(s.bubble.measured));
  setText('bubble-sim', s.bubble.simulated === null ? (s.state === 'finished' ? dash : 'at the end') : pct(s.bubble.simulated));
  const alive = s.nodes.filter((n) => n.alive).length;
  setText('nodes', s.nodes.length ? alive + ' of ' + s.nodes.length : dash);
  setText('stages-alive', s.stages.length ? s.stages_alive + ' of ' + s.stages.length : dash);
  const c = s.checkpoints;
  setText('checkpoints', c.last ? c.count + ' (step ' + c.last.step + ', ' + c.last.seconds.toFixed(2) + ' s)' : String(c.count));
  updateCharts(s);
  renderStages(s);
  renderEvents(s);
  renderSample(s);
  refreshTimeline(s.step);
}

function connect() {
  const conn = el('connection');
  const events = new EventSource('/api/events');
  events.onopen = () => {
    document.body.dataset.connection = 'open';
    conn.textContent = 'live';
    conn.className = 'connection';
  };
  events.onmessage = (e) => render(JSON.parse(e.data));
  // EventSource reconnects by itself; say so meanwhile (a finished run's server is gone).
  events.onerror = () => {
    document.body.dataset.connection = 'lost';
    conn.textContent = 'not connected (retrying)';
    conn.className = 'connection lost';
  };
}

setupCharts();
connect();
