#pragma once
// GPT-2's reversible byte ↔ printable-character mapping used by byte-level BPE vocabularies:
// printable Latin-1 bytes map to themselves, the other 68 bytes to U+0100 onwards in order.

#include <optional>
#include <string>
#include <string_view>

namespace rtgen {

char32_t ByteToCodepoint(unsigned char byte);
std::optional<unsigned char> CodepointToByte(char32_t cp);

// Encodes raw bytes as the UTF-8 of their mapped characters ("Hi there" → "HiĠthere").
std::string BytesToPiece(std::string_view bytes);
// The inverse; characters outside the mapping are kept as their UTF-8 bytes.
std::string PieceToBytes(std::string_view piece);

}  // namespace rtgen
