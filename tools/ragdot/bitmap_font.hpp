// A 5x7 pixel font for chart labels: printable ASCII, drawn by hand for this program.
#pragma once

namespace ragdot::cli {

inline constexpr int kGlyphWidth = 5;
inline constexpr int kGlyphHeight = 7;
inline constexpr int kGlyphAdvance = kGlyphWidth + 1;  // one column of space between letters

// Rows of the glyph for `c`, top first: '#' is ink, '.' is background. Characters outside
// printable ASCII get '?'.
const char* const* glyph_rows(char c);

}  // namespace ragdot::cli
