// Package client holds typed HTTP clients for the agent API and the core API.
package client
