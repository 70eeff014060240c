// Lexer and parser: template source -> syntax tree, with jinja2's
// whitespace rules as transformers configures them (trim_blocks and
// lstrip_blocks on, one trailing newline dropped, \r\n and \r read as \n).
#ifndef QUANTD_WORKER_IO_CHAT_TEMPLATE_PARSER_H_
#define QUANTD_WORKER_IO_CHAT_TEMPLATE_PARSER_H_

#include <string_view>

#include "worker/io/chat_template/ast.h"

namespace quantd::io::chat_template {

// Throws TemplateError: INVALID_ARGUMENT "line L:C: ..." for syntax errors
// and refused constructs, RESOURCE_EXHAUSTED when nesting passes max_depth.
Body ParseTemplate(std::string_view source, int max_depth);

// Filter and test names the interpreter implements (builtins.cc); the
// parser refuses others, as jinja2 does when it compiles.
bool IsKnownFilter(const std::string& name);
bool IsKnownTest(const std::string& name);

}  // namespace quantd::io::chat_template

#endif  // QUANTD_WORKER_IO_CHAT_TEMPLATE_PARSER_H_
