// muster web UI: local times, and live regions refreshed when the event
// stream says something changed. No dependencies.
(function () {
  "use strict";

  var pad = function (n) { return (n < 10 ? "0" : "") + n; };

  // absolute is a time in the viewer's zone, with the zone: what a title
  // shows on hover.
  function absolute(d) {
    var off = -d.getTimezoneOffset(), sign = off >= 0 ? "+" : "-";
    off = Math.abs(off);
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
      pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds()) +
      " (UTC" + sign + pad(Math.floor(off / 60)) + ":" + pad(off % 60) + ")";
  }

  // relative says how long ago (or in how long) d is, briefly.
  function relative(d, now) {
    var s = Math.round((now - d.getTime()) / 1000), future = s < 0;
    s = Math.abs(s);
    var text;
    if (s < 45) text = s + " s";
    else if (s < 45 * 60) text = Math.round(s / 60) + " min";
    else if (s < 36 * 3600) text = Math.round(s / 3600) + " h";
    else text = Math.round(s / 86400) + " d";
    return future ? "in " + text : text + " ago";
  }

  // Show every <time datetime> relative to now, with the absolute time in
  // the viewer's zone on hover.
  function localTimes(root) {
    var els = root.querySelectorAll("time[datetime]"), now = Date.now();
    for (var i = 0; i < els.length; i++) {
      var el = els[i], d = new Date(el.getAttribute("datetime"));
      if (isNaN(d.getTime())) continue;
      el.textContent = relative(d, now);
      el.setAttribute("title", absolute(d));
      el.setAttribute("data-local", "1");
    }
  }

  // Copy buttons copy a full id; they stay hidden where the clipboard is
  // not available.
  function copyButtons(root) {
    if (!navigator.clipboard) return;
    var els = root.querySelectorAll("button.copy[data-copy]");
    for (var i = 0; i < els.length; i++) els[i].hidden = false;
  }
  document.addEventListener("click", function (e) {
    var b = e.target.closest && e.target.closest("button.copy[data-copy]");
    if (!b || !navigator.clipboard) return;
    navigator.clipboard.writeText(b.getAttribute("data-copy")).then(function () { status("Copied."); });
  });

  function status(text) {
    var el = document.getElementById("live-status");
    if (el) el.textContent = text;
  }

  // busy reports whether the person is typing in the live region: a refresh
  // then waits, so that nothing they wrote is lost. A field still holding
  // what the page filled in (a default such as a freeze's 2h) is nobody's
  // typing.
  function busy(region) {
    var a = document.activeElement;
    if (a && region.contains(a) && (a.tagName === "INPUT" || a.tagName === "TEXTAREA" || a.tagName === "SELECT")) return true;
    var fields = region.querySelectorAll("input:not([type=hidden]), textarea");
    for (var i = 0; i < fields.length; i++) {
      var f = fields[i];
      if (f.type === "checkbox" || f.type === "radio" ? f.checked !== f.defaultChecked : f.value !== f.defaultValue) return true;
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

  // follow shows, in a <pre data-follow-output="ID">, the output of action
  // ID as the server has it, again every second while the action runs and
  // the element is shown (its <details> open): as text, never as HTML. It
  // keeps to the end of the output unless the person scrolled up. It pauses
  // while the tab is hidden, retries a server error or a lost connection
  // every 3 s, and stops for good, saying why in the box, on any 4xx (the
  // action gone, or no longer the person's to see) or an answer that is no
  // JSON (a session that ended and was sent to the sign-in page).
  var following = {}, paused = [];
  document.addEventListener("visibilitychange", function () {
    if (document.hidden) return;
    var again = paused;
    paused = [];
    for (var i = 0; i < again.length; i++) again[i]();
  });
  function Stop(msg) { this.msg = msg; }
  function follow(pre) {
    var id = pre.getAttribute("data-follow-output");
    if (!id || following[id] === pre) return;
    following[id] = pre;
    function shown() {
      var d = pre.closest("details");
      return document.body.contains(pre) && (!d || d.open);
    }
    function stop(msg) {
      if (following[id] !== pre) return;
      delete following[id];
      pre.textContent = (pre.textContent ? pre.textContent + "\n\n" : "") + msg;
      pre.setAttribute("data-stopped", "1");
    }
    function step() {
      if (following[id] !== pre || !shown()) { if (following[id] === pre) delete following[id]; return; }
      if (document.hidden) { paused.push(step); return; }
      fetch("/ui/actions/" + encodeURIComponent(id) + "?part=output", { credentials: "same-origin", headers: { "Accept": "application/json" } }).then(function (res) {
        if (res.redirected && res.url.indexOf("/ui/login") >= 0) throw new Stop("(your session ended: reload the page to sign in again)");
        if (res.status >= 400 && res.status < 500) {
          throw new Stop(res.status === 404 || res.status === 403 ? "(this action's output is not available to you any more)" : "(the output could not be loaded: HTTP " + res.status + ")");
        }
        if (!res.ok) throw new Error("HTTP " + res.status);
        if ((res.headers.get("Content-Type") || "").indexOf("application/json") !== 0) throw new Stop("(the output could not be read: reload the page)");
        return res.json().catch(function () { throw new Stop("(the output could not be read: reload the page)"); });
      }).then(function (o) {
        if (following[id] !== pre) return;
        var atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
        pre.textContent = o.output || "(no output yet: " + o.state.toLowerCase().replace(/_/g, " ") + ")";
        pre.setAttribute("data-state", o.state);
        if (atEnd) pre.scrollTop = pre.scrollHeight;
        if (o.final) { pre.setAttribute("data-final", "1"); delete following[id]; return; }
        setTimeout(step, 1000);
      }).catch(function (err) {
        if (err instanceof Stop) { stop(err.msg); return; }
        setTimeout(step, 3000);
      });
    }
    step();
  }
  function followOutputs(root) {
    var pres = root.querySelectorAll("[data-follow-output]");
    for (var i = 0; i < pres.length; i++) {
      var d = pres[i].closest("details");
      if (!d || d.open) follow(pres[i]);
    }
  }
  document.addEventListener("toggle", function (e) {
    var d = e.target;
    if (d.tagName !== "DETAILS" || !d.open) return;
    var pre = d.querySelector("[data-follow-output]");
    if (pre) follow(pre);
  }, true);

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
        // What the person opened stays open, its output kept.
        var open = {}, kept = region.querySelectorAll("details[data-keep-open][open]");
        for (var k = 0; k < kept.length; k++) {
          var p = kept[k].querySelector("[data-follow-output]");
          open[kept[k].id] = p ? { text: p.textContent, top: p.scrollTop } : {};
        }
        region.innerHTML = html; // rendered and escaped by the server's templates
        Object.keys(open).forEach(function (id) {
          var d = document.getElementById(id);
          if (!d || !region.contains(d)) return;
          var p = d.querySelector("[data-follow-output]");
          if (p && open[id].text !== undefined) { p.textContent = open[id].text; p.scrollTop = open[id].top; }
          d.open = true;
        });
        followOutputs(region);
        localTimes(region);
        copyButtons(region);
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

    // The stream starts after the last event the page was rendered from:
    // what was committed since (before the stream opened) makes the first
    // refresh, so nothing is missed.
    var q = main.getAttribute("data-stream") || "", since = main.getAttribute("data-since");
    if (since) q += (q ? "&" : "") + "since=" + encodeURIComponent(since);
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
    // Relative times age: say them again every half minute.
    setInterval(function () { localTimes(document); }, 30000);
    copyButtons(document);
    // On a phone the filters start folded behind their one control.
    if (window.matchMedia && window.matchMedia("(max-width: 700px)").matches) {
      var boxes = document.querySelectorAll("details.filter-box");
      for (var i = 0; i < boxes.length; i++) boxes[i].open = false;
    }
    followOutputs(document);
    var main = document.getElementById("main");
    if (main) live(main);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
