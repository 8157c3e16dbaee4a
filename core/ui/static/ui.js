// muster web UI: local times, and live regions refreshed when the event
// stream says something changed. No dependencies.
(function () {
  "use strict";

  var pad = function (n) { return (n < 10 ? "0" : "") + n; };

  // Show every <time datetime> in the viewer's time zone; UTC stays on hover.
  function localTimes(root) {
    var els = root.querySelectorAll("time[datetime]");
    for (var i = 0; i < els.length; i++) {
      var el = els[i], d = new Date(el.getAttribute("datetime"));
      if (isNaN(d.getTime())) continue;
      var off = -d.getTimezoneOffset(), sign = off >= 0 ? "+" : "-";
      off = Math.abs(off);
      el.textContent = d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
        pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds()) +
        " (UTC" + sign + pad(Math.floor(off / 60)) + ":" + pad(off % 60) + ")";
      el.setAttribute("data-local", "1");
    }
  }

  function status(text) {
    var el = document.getElementById("live-status");
    if (el) el.textContent = text;
  }

  // busy reports whether the person is typing in the live region: a refresh
  // then waits, so that nothing they wrote is lost.
  function busy(region) {
    var a = document.activeElement;
    if (a && region.contains(a) && (a.tagName === "INPUT" || a.tagName === "TEXTAREA" || a.tagName === "SELECT")) return true;
    var fields = region.querySelectorAll("input:not([type=hidden]), textarea");
    for (var i = 0; i < fields.length; i++) {
      var f = fields[i];
      if (f.type === "checkbox" || f.type === "radio" ? f.checked : f.value !== "") return true;
    }
    return false;
  }

  // focusKey describes the focused element of the region, so that focus can
  // return to its new copy after a refresh (keyboard users keep their place).
  function focusKey(region) {
    var a = document.activeElement;
    if (!a || a === region || !region.contains(a)) return null;
    if (a.id) return "#" + CSS.escape(a.id);
    var sel = a.tagName.toLowerCase();
    if (a.getAttribute("href")) sel += '[href="' + CSS.escape(a.getAttribute("href")) + '"]';
    if (a.className) sel += "." + a.className.trim().split(/\s+/).map(CSS.escape).join(".");
    var item = a.closest("[data-action]");
    if (item) sel = '[data-action="' + CSS.escape(item.getAttribute("data-action")) + '"] ' + sel;
    return sel;
  }

  function live(main) {
    var url = main.getAttribute("data-live"), region = document.getElementById("live");
    if (!url || !region || !window.EventSource) return;
    // A refresh starts at most once a second (GAP): the events of a busy
    // second make one refresh, not one each.
    var pending = false, running = false, timer = null, last = 0, GAP = 1000;

    function refresh() {
      timer = null;
      if (running) { pending = true; return; }
      if (busy(region)) { pending = true; status("Updates are waiting until you finish typing."); return; }
      running = true; pending = false; last = Date.now();
      fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" } }).then(function (res) {
        if (res.redirected && res.url.indexOf("/ui/login") >= 0) { location.assign(res.url); return null; }
        if (!res.ok) throw new Error("HTTP " + res.status);
        return res.text();
      }).then(function (html) {
        if (html === null) return;
        var key = focusKey(region);
        region.innerHTML = html; // rendered and escaped by the server's templates
        localTimes(region);
        var again = key && region.querySelector(key);
        if (again) again.focus();
        else if (key) main.focus(); // what had focus is gone: stay in the page
        status("");
        main.setAttribute("data-refreshed", String(Date.now()));
      }).catch(function () {
        status("Could not refresh; retrying on the next change.");
      }).then(function () {
        running = false;
        if (pending) schedule();
      });
    }
    function schedule() { if (!timer) timer = setTimeout(refresh, Math.max(150, last + GAP - Date.now())); }

    region.addEventListener("focusout", function () { if (pending) schedule(); });
    region.addEventListener("input", function () { /* refresh waits while typing */ });

    var q = main.getAttribute("data-stream");
    var es = new EventSource("/ui/stream" + (q ? "?" + q : ""));
    es.onopen = function () { main.setAttribute("data-live-open", "1"); status(""); };
    es.onmessage = schedule;
    es.addEventListener("signed-out", function () {
      es.close();
      location.assign("/ui/login?expired=1&next=" + encodeURIComponent(location.pathname + location.search));
    });
    es.onerror = function () {
      if (es.readyState === EventSource.CLOSED) {
        status("Live updates stopped. Reload the page (you may need to sign in again).");
      } else {
        status("Reconnecting live updates…");
      }
    };
  }

  function start() {
    localTimes(document);
    var main = document.getElementById("main");
    if (main) live(main);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
