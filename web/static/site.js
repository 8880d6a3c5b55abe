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
      var left = Math.floor((Date.parse(el.getAttribute("data-deadline")) - Date.now()) / 1000);
      var text;
      if (isNaN(left)) continue;
      if (left <= 0) {
        text = "(échéance passée : ne payez plus cette demande)";
        el.classList.add("over");
      } else {
        var h = Math.floor(left / 3600), m = Math.floor((left % 3600) / 60), s = left % 60;
        text = "(il reste " + (h > 0 ? h + " h " : "") + pad(m) + " min " + pad(s) + " s)";
      }
      if (el.textContent !== text) el.textContent = text;
    }
  }
  tick();
  setInterval(tick, 1000);
})();
