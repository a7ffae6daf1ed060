#pragma once
// The live page's own files (apps/watch/page/: index.html, page.js, page.css), embedded in
// the binary at build time by cmake/embed_files.cmake: a server serves them from memory,
// whatever its working directory, and nothing of the page is fetched from another host.
// Chart.js is not among them: Debian's libjs-chart.js is read at run time (chart_js.hpp).
#include <span>
#include <string_view>

namespace conveyor::watch {

struct EmbeddedFile {
  std::string_view name;  // the file name, without a folder ("page.js")
  std::string_view text;  // its bytes, exactly
};

/// Every embedded page file, in the order CMake lists them.
std::span<const EmbeddedFile> page_files();

/// The embedded file called `name`, or nullptr.
const EmbeddedFile* find_page_file(std::string_view name);

/// The Content-Type a page file is served with, from its extension (html, js, css, svg;
/// anything else is application/octet-stream).
std::string_view page_content_type(std::string_view name);

}  // namespace conveyor::watch
