#include "apps/config/config_loader.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "apps/config/config_keys.hpp"
#include "apps/config/config_validation.hpp"
#include "apps/config/config_value.hpp"
#include "apps/config/yaml_size.hpp"
#include "apps/text/message_text.hpp"
#include "kernels/common/error.hpp"

namespace conveyor {
namespace {

std::string trim(std::string s) {
  const auto first = s.find_first_not_of(" \t");
  const auto last = s.find_last_not_of(" \t");
  return first == std::string::npos ? std::string() : s.substr(first, last - first + 1);
}

// Where values come from: a config file (errors say "file:line") or --set.
struct Source {
  std::string file;  // may be empty for a YAML node that was not read from a file
  bool is_file = true;

  std::string at(const YAML::Node& node) const {
    if (!is_file) return "--set";
    const auto mark = node.Mark();
    if (mark.line < 0) return file;
    return (file.empty() ? "line " : file + ":") + std::to_string(mark.line + 1);
  }
};

// Applies config mappings and --set values to one RunConfig, remembering where each key
// was last set so that a cross-key error can point at the file line or the --set.
class ConfigBuilder {
 public:
  RunConfig config;

  void apply_mapping(const YAML::Node& node, const std::string& prefix, const Source& src) {
    for (const auto& item : node) {
      const YAML::Node& k = item.first;
      if (!k.IsScalar()) fail(src.at(k), "keys must be names, got " + describe_yaml(k));
      const std::string name = prefix.empty() ? k.Scalar() : prefix + "." + k.Scalar();
      apply_value(name, item.second, src, src.at(k));
    }
  }

  void apply_value(const std::string& name, const YAML::Node& v, const Source& src,
                   const std::string& where) {
    if (const ConfigKey* key = find_config_key(name)) {
      if (src.is_file) {
        auto [it, fresh] = seen_in_file_.emplace(name, where);
        if (!fresh) fail(where, name + ": given twice (first at " + it->second + ")");
      }
      try {
        key->set(config, v);
      } catch (const ConfigValueError& e) {
        fail(where, name + ": " + e.what());
      }
      origin_[name] = where;
      return;
    }
    if (is_config_section(name)) {
      if (src.is_file && v.IsMap()) {
        // A section given twice in one file would merge silently, its keys' duplicates
        // aside: refused like a key given twice.
        auto [it, fresh] = seen_in_file_.emplace(name + ":", where);
        if (!fresh) fail(where, name + ": section given twice (first at " + it->second + ")");
      }
      if (v.IsMap()) return apply_mapping(v, name, src);
      if (v.IsNull()) return;  // `model:` with nothing under it
      fail(where, name + ": expected a mapping of " + name + ".* keys, got " + describe_yaml(v));
    }
    fail(where, unknown_key_message(name));
  }

  void validate() const {
    if (auto p = check_run_config(config)) {
      auto it = origin_.find(p->key);
      if (it == origin_.end()) it = origin_.find(p->other);
      fail(it == origin_.end() ? "" : it->second, p->key + ": " + p->message);
    }
  }

 private:
  [[noreturn]] static void fail(const std::string& where, const std::string& what) {
    throw InputError(where.empty() ? what : where + ": " + what);
  }

  std::map<std::string, std::string> seen_in_file_;  // key -> where, to catch duplicates
  std::map<std::string, std::string> origin_;        // key -> where it was last set
};

void apply_root(ConfigBuilder& b, const YAML::Node& root, const std::string& source) {
  if (!root.IsDefined() || root.IsNull()) return;  // an empty file: all defaults
  if (!root.IsMap())
    throw InputError((source.empty() ? "" : source + ": ") +
                     "the top level must be a mapping of sections (model:, pipeline:, train:, "
                     "...), got " + describe_yaml(root));
  b.apply_mapping(root, "", Source{source, true});
}

YAML::Node load_file(const std::string& path) {
  // A directory would read as empty (all defaults) and a device or pipe may never end.
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!ec && std::filesystem::is_directory(status))
    throw InputError(path + ": is a directory, not a config file");
  if (!ec && !std::filesystem::is_regular_file(status))
    throw InputError(path + ": is not a regular file (a config is a YAML file)");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot read config file: " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw InputError(path + ": cannot read config file: " + std::strerror(errno));
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(text.str());
  } catch (const YAML::ParserException& e) {
    throw InputError(path + ":" + std::to_string(e.mark.line + 1) + ":" +
                     std::to_string(e.mark.column + 1) + ": not valid YAML: " + e.msg);
  }
  if (documents.size() > 1)
    throw InputError(path + ":" + std::to_string(documents[1].Mark().line + 1) +
                     ": a second YAML document (after '---'): a config is one document");
  if (documents.empty()) return YAML::Node();
  refuse_oversized_yaml(documents.front(), path);
  return documents.front();
}

// Emits the keys under `prefix` as nested block mappings, each leaf with its help comment.
void emit_section(YAML::Emitter& out, const RunConfig& c, const std::string& prefix) {
  std::vector<std::string> children;
  for (const auto& k : config_keys()) {
    if (k.secret) continue;  // never written: a section of secrets alone is left out whole
    if (!prefix.empty() && k.name.compare(0, prefix.size() + 1, prefix + ".") != 0) continue;
    const std::string rest = prefix.empty() ? k.name : k.name.substr(prefix.size() + 1);
    const std::string child = rest.substr(0, rest.find('.'));
    if (std::find(children.begin(), children.end(), child) == children.end())
      children.push_back(child);
  }
  out << YAML::BeginMap;
  for (const auto& child : children) {
    const std::string name = prefix.empty() ? child : prefix + "." + child;
    out << YAML::Key << child << YAML::Value;
    if (const ConfigKey* key = find_config_key(name)) {
      out << key->get(c) << YAML::Comment(key->help);
    } else {
      emit_section(out, c, name);
    }
  }
  out << YAML::EndMap;
}

}  // namespace

std::pair<std::string, YAML::Node> parse_set_argument(const std::string& assignment) {
  const auto eq = assignment.find('=');
  const std::string key = trim(assignment.substr(0, eq));
  if (eq == std::string::npos || key.empty())
    throw InputError("--set '" + printable_excerpt(assignment) + "': expected KEY=VALUE (e.g. --set model.layers=4)");
  const std::string value = assignment.substr(eq + 1);
  YAML::Node node;
  try {
    node = YAML::Load(value);
  } catch (const YAML::ParserException& e) {
    throw InputError("--set: " + printable_excerpt(key) + ": value '" + printable_excerpt(value) +
                     "' is not valid YAML: " + e.msg);
  }
  refuse_oversized_yaml(node, "--set " + printable_excerpt(key));
  return {key, node};
}

RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides) {
  ConfigBuilder b;
  if (!path.empty()) apply_root(b, load_file(path), path);
  for (const auto& assignment : overrides) {
    auto [key, value] = parse_set_argument(assignment);
    b.apply_value(key, value, Source{"", false}, "--set");
  }
  b.validate();
  return b.config;
}

RunConfig parse_run_config(const YAML::Node& root, const std::string& source) {
  refuse_oversized_yaml(root, source);
  ConfigBuilder b;
  apply_root(b, root, source);
  b.validate();
  return b.config;
}

YAML::Node resolved_yaml(const RunConfig& config) {
  YAML::Node root(YAML::NodeType::Map);
  for (const auto& key : config_keys()) {
    YAML::Node node = root;
    std::string rest = key.name;
    for (auto dot = rest.find('.'); dot != std::string::npos; dot = rest.find('.')) {
      YAML::Node child = node[rest.substr(0, dot)];
      node.reset(child);  // rebind, not assign: Node::operator= would overwrite the value
      rest = rest.substr(dot + 1);
    }
    node[rest] = key.get(config);
  }
  return root;
}

std::string to_yaml(const RunConfig& config) {
  YAML::Emitter out;
  out << YAML::Comment("conveyor run config, resolved: defaults, file and --set overrides");
  out << YAML::Newline;
  emit_section(out, config, "");
  return std::string(out.c_str()) + "\n";
}

}  // namespace conveyor
