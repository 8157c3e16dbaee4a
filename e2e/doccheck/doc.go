// Package doccheck holds the tests of the repository's Markdown: the README
// stays a short introduction (at most readmeMaxLines lines) and every
// relative link in README.md and docs/*.md leads to a file that exists and,
// when it names one, to a heading of that file.
package doccheck
