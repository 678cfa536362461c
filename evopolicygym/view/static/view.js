// evopolicy view: the only script of the pages (no inline script: the CSP forbids it).
// It draws figures from their data-spec JSON, and follows the store: on a server-sent
// "head" event it fetches the page again and swaps every element marked data-live.
"use strict";

(function () {
  function drawFigures(root) {
    if (typeof Plotly === "undefined") return;
    root.querySelectorAll("[data-spec]").forEach(function (el) {
      var spec;
      try {
        spec = JSON.parse(el.getAttribute("data-spec"));
      } catch (e) {
        el.textContent = "this figure cannot be drawn";
        return;
      }
      Plotly.react(el, spec.data || [], spec.layout || {}, spec.config || {});
    });
  }

  var fetching = false;
  var pending = false;
  var lastFetch = 0;
  var MIN_INTERVAL_MS = 1000;

  function setState(text) {
    var el = document.getElementById("live-state");
    if (el) el.textContent = text;
  }

  function swap(doc) {
    document.querySelectorAll("[data-live]").forEach(function (el) {
      var key = el.getAttribute("data-live");
      var fresh = doc.querySelector('[data-live="' + CSS.escape(key) + '"]');
      if (!fresh) return;
      var open = el.querySelectorAll("details[open]");
      var openIds = Array.prototype.map.call(open, function (d) { return d.id; });
      el.replaceChildren.apply(el, Array.prototype.map.call(fresh.childNodes, function (n) {
        return document.importNode(n, true);
      }));
      openIds.forEach(function (id) {
        var d = id && document.getElementById(id);
        if (d) d.open = true;
      });
      drawFigures(el);
    });
    var head = doc.body.getAttribute("data-head");
    if (head) document.body.setAttribute("data-head", head);
    document.dispatchEvent(new CustomEvent("evopolicy:updated"));
  }

  function refresh() {
    if (fetching) { pending = true; return; }
    var wait = lastFetch + MIN_INTERVAL_MS - Date.now();
    if (wait > 0) { pending = true; setTimeout(function () { if (pending) { pending = false; refresh(); } }, wait); return; }
    fetching = true;
    lastFetch = Date.now();
    fetch(window.location.href, { headers: { "Accept": "text/html" }, credentials: "same-origin" })
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.text(); })
      .then(function (text) { swap(new DOMParser().parseFromString(text, "text/html")); })
      .catch(function () { setState("cannot reach the viewer"); })
      .then(function () {
        fetching = false;
        if (pending) { pending = false; refresh(); }
      });
  }

  function follow() {
    if (!document.querySelector("[data-live]") || typeof EventSource === "undefined") return;
    var run = document.body.getAttribute("data-live-run");
    var source = new EventSource("/live" + (run ? "?run=" + encodeURIComponent(run) : ""));
    source.addEventListener("head", function (e) {
      var head = 0;
      try { head = JSON.parse(e.data).head; } catch (err) { return; }
      var shown = parseInt(document.body.getAttribute("data-head") || "0", 10);
      if (head > shown) refresh();
    });
    source.onerror = function () { setState("reconnecting…"); };
  }

  document.addEventListener("DOMContentLoaded", function () {
    drawFigures(document);
    follow();
  });
  // plotly.min.js loads deferred after this script: draw once it has.
  window.addEventListener("load", function () { drawFigures(document); });
})();
