#include "worker/io/tokenizer/unicode_normalizer.h"

#include <unicode/normalizer2.h>
#include <unicode/unistr.h>

namespace quantd::io {

std::string NormalizeNfc(std::string_view text) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
  if (U_FAILURE(status)) return std::string(text);
  // Round trip through UTF-16 only when the input is well-formed UTF-8;
  // ICU would replace bad bytes with U+FFFD.
  const icu::UnicodeString in = icu::UnicodeString::fromUTF8(
      icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  std::string check;
  in.toUTF8String(check);
  if (check != text) return std::string(text);
  if (nfc->isNormalized(in, status) && U_SUCCESS(status)) return std::string(text);
  status = U_ZERO_ERROR;
  const icu::UnicodeString out = nfc->normalize(in, status);
  if (U_FAILURE(status)) return std::string(text);
  std::string result;
  out.toUTF8String(result);
  return result;
}

}  // namespace quantd::io
