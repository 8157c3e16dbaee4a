// Package textsafe makes text that came from elsewhere (an agent, a command's
// output, another user) safe to print on a terminal: control characters and
// bidirectional overrides become visible escapes, so nothing a record holds
// can move the cursor, recolour the screen, rewrite a line already printed or
// reorder what a reader sees.
package textsafe

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Escape returns s with every character a terminal could act on written as a
// visible escape, and everything else unchanged:
//
//   - C0 controls, every one of them: \n, \r, \t as themselves in Go
//     notation, the others as \xNN (ESC is \x1b);
//   - DEL as \x7f;
//   - C1 controls (U+0080 to U+009F, which some terminals take as CSI and
//     friends even when UTF-8 encoded) as \u0080 to \u009f;
//   - bidirectional formatting characters (U+061C, U+200E, U+200F, U+202A to
//     U+202E, U+2066 to U+2069) as \u202e and the like, so that a name cannot
//     display reversed;
//   - each byte of invalid UTF-8 as \xNN (a terminal in an 8-bit mode reads
//     a lone 0x9b as CSI).
//
// A backslash is left as it is: the escapes are for reading, not for parsing
// back. Escape of text without any of these returns it unchanged.
func Escape(s string) string {
	i := firstUnsafe(s)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// firstUnsafe returns the index of the first byte of s that Escape changes,
// or -1.
func firstUnsafe(s string) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size <= 1) || unsafeRune(r) {
			return i
		}
		i += size
	}
	return -1
}

// unsafeRune reports whether r, a rune at or above U+0080, is a C1 control or
// a bidirectional formatting character.
func unsafeRune(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f:
		return true
	case r >= 0x202a && r <= 0x202e:
		return true
	case r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// JSON returns a JSON document with every C1 control, DEL and bidirectional
// formatting character written as a \uXXXX escape. encoding/json already
// escapes C0 controls and replaces invalid UTF-8, but passes these through;
// in JSON they can only stand inside strings, where the escape means the same
// character, so the document decodes to the same values.
func JSON(doc []byte) []byte {
	if !jsonNeedsEscape(doc) {
		return doc
	}
	var b bytes.Buffer
	b.Grow(len(doc) + 16)
	for i := 0; i < len(doc); {
		r, size := utf8.DecodeRune(doc[i:])
		if r == 0x7f || (r >= utf8.RuneSelf && unsafeRune(r)) {
			fmt.Fprintf(&b, `\u%04x`, r)
		} else {
			b.Write(doc[i : i+size])
		}
		i += size
	}
	return b.Bytes()
}

func jsonNeedsEscape(doc []byte) bool {
	for i := 0; i < len(doc); {
		if doc[i] < utf8.RuneSelf {
			if doc[i] == 0x7f {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(doc[i:])
		if unsafeRune(r) {
			return true
		}
		i += size
	}
	return false
}
