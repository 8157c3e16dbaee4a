package ui

import (
	"net/http"

	"github.com/musterhq/muster/core/notify"
	"github.com/musterhq/muster/core/store"
)

// destinationView is one row of the Notifications page.
type destinationView struct {
	Name, URL, Format string
	Events, Clusters  []string
	Stat              store.DeliveryStat
	// Dead are its newest dead deliveries.
	Dead []store.Delivery
}

// deadShown is how many dead deliveries of a destination the page lists.
const deadShown = 10

// notifications shows each destination (its URL's scheme and host alone),
// its backlog, its last success and failure, and its newest dead
// deliveries (admin).
func (s *Server) notifications(w http.ResponseWriter, r *http.Request, v *visitor) {
	ctx := r.Context()
	var out []destinationView
	var dests []notify.Destination
	if s.cfg.Notify != nil {
		dests = s.cfg.Notify()
	}
	err := s.st.Read(ctx, func(rd store.Reader) error {
		if len(dests) == 0 {
			return nil
		}
		stats, err := rd.DeliveryStats(ctx, notify.Names(dests)...)
		if err != nil {
			return err
		}
		by := map[string]store.DeliveryStat{}
		for _, st := range stats {
			by[st.Destination] = st
		}
		for _, d := range dests {
			dv := destinationView{Name: d.Name, URL: notify.Redact(d.URL), Format: d.Format, Events: d.Events,
				Clusters: d.Clusters, Stat: by[d.Name]}
			if dv.Stat.Dead > 0 {
				if dv.Dead, err = rd.Deliveries(ctx, store.DeliveryQuery{Destination: d.Name, State: store.DeliveryDead, Limit: deadShown}); err != nil {
					return err
				}
			}
			out = append(out, dv)
		}
		return nil
	})
	if err != nil {
		s.storeError(w, r, v, err)
		return
	}
	vw := newView(v, "Notifications", "notifications")
	vw.Data = out
	s.render(w, r, http.StatusOK, "notifications", vw)
}
