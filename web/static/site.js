// Kernodeck: what the pages need a script for, on top of htmx. Everything
// here is an addition: the pages work without it.
(function () {
  "use strict";
  document.documentElement.classList.add("js");

  // Copy buttons: <button class="copy" data-copy="element-id">.
  document.addEventListener("click", function (ev) {
    var btn = ev.target.closest("button[data-copy]");
    if (!btn) return;
    var src = document.getElementById(btn.getAttribute("data-copy"));
    if (!src) return;
    var text = src.textContent.trim();
    var done = function () {
      var label = btn.textContent;
      btn.textContent = "Copié";
      btn.setAttribute("aria-live", "polite");
      setTimeout(function () { btn.textContent = label; }, 2000);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () { selectText(src); });
    } else {
      selectText(src);
    }
  });

  function selectText(el) {
    var range = document.createRange();
    range.selectNodeContents(el);
    var sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
  }

  // Deadline countdown: <span data-deadline="RFC 3339">. Read again every
  // second, so parts swapped in by htmx count down too.
  function pad(n) { return n < 10 ? "0" + n : "" + n; }
  function tick() {
    var els = document.querySelectorAll("[data-deadline]");
    for (var i = 0; i < els.length; i++) {
      var el = els[i];
      var ms = Date.parse(el.getAttribute("data-deadline")) - Date.now();
      var left = Math.floor(ms / 1000);
      var text;
      if (isNaN(left)) continue;
      if (left <= 0) {
        text = "(échéance passée : ne payez plus cette demande)";
        el.classList.add("over");
        if (ms <= 0) refreshLive(el);
      } else {
        var h = Math.floor(left / 3600), m = Math.floor((left % 3600) / 60), s = left % 60;
        text = "(il reste " + (h > 0 ? h + " h " : "") + pad(m) + " min " + pad(s) + " s)";
      }
      if (el.textContent !== text) el.textContent = text;
    }
  }
  // A deadline reached inside a page's live part: the server now answers
  // the expired state and the form for a new request, which no server
  // event announces, so the live part is fetched again (then every 5 s for
  // a minute while the countdown stays, should this clock run ahead of the
  // server's; the server answers 204 while nothing changed).
  var refreshes = {};
  function refreshLive(el) {
    var live = el.closest("#live");
    if (!live || !window.htmx || !live.getAttribute("hx-get")) return;
    var key = el.getAttribute("data-deadline");
    var r = refreshes[key] || (refreshes[key] = { next: 0, left: 12 });
    if (r.left <= 0 || Date.now() < r.next) return;
    r.left--;
    r.next = Date.now() + 5000;
    htmx.ajax("GET", live.getAttribute("hx-get"), { source: live, target: live, swap: "innerHTML" });
  }

  tick();
  setInterval(tick, 1000);
})();
