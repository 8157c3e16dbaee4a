// Package doccheck holds the tests of the repository's Markdown: the README
// stays a short introduction (at most readmeMaxLines lines); every
// relative link in README.md and docs/*.md leads to a file that exists and,
// when it names one, to a heading of that file; every test, benchmark and
// fuzz test they name exists; the import rows of docs/architecture.md
// are what go list says; and within core/orchestrate no file calls into a
// file on a higher row, the rows docs/architecture.md shows (make docs
// writes both).
package doccheck
