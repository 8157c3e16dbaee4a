// Package monitoring holds the tests of configs/monitoring/: the shipped
// Prometheus alert rules pass `promtool check rules`, their unit tests pass
// `promtool test rules`, every alert has a unit test that fires it, and the
// Grafana dashboard is a dashboard whose every panel queries muster's
// metrics. That every metric they name is served by a running core or agent
// is e2e's TestMonitoringNamesOnlyServedMetrics.
package monitoring
