#include <algorithm>

#include "apps/watch/page_files.hpp"

namespace conveyor::watch {

const EmbeddedFile* find_page_file(std::string_view name) {
  const auto files = page_files();
  const auto it = std::ranges::find(files, name, &EmbeddedFile::name);
  return it == files.end() ? nullptr : &*it;
}

std::string_view page_content_type(std::string_view name) {
  if (name.ends_with(".html")) return "text/html; charset=utf-8";
  if (name.ends_with(".js")) return "text/javascript; charset=utf-8";
  if (name.ends_with(".css")) return "text/css; charset=utf-8";
  if (name.ends_with(".svg")) return "image/svg+xml";
  return "application/octet-stream";
}

}  // namespace conveyor::watch
