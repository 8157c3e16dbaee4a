module github.com/musterhq/muster

go 1.26.8

require (
	github.com/google/uuid v1.6.0
	github.com/mattn/go-sqlite3 v1.14.53
)
