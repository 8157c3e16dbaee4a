// Package words holds the small rules of English that every surface
// (CLI, web UI, reasons, notifications) spells the same way.
package words

import (
	"strconv"
	"strings"
)

// Count is n and word, with an s when n is not 1: "1 node", "2 nodes",
// "0 nodes". Words whose plural is not word+"s" are not for Count.
func Count(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// List is vs joined by commas, or "none" when there is none: "members
// none", never "members " with nothing after it.
func List(vs []string) string {
	if len(vs) == 0 {
		return "none"
	}
	return strings.Join(vs, ",")
}
