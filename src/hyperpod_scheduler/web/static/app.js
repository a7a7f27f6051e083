// Progressive enhancement only: every page works without this file.
(function () {
  // Fill in the viewer's timezone when the URL does not name one.
  var tz = document.getElementById("tz");
  if (tz && !/[?&]tz=/.test(location.search) && window.Intl) {
    var mine = Intl.DateTimeFormat().resolvedOptions().timeZone;
    if (mine && mine !== tz.value) { location.search = "?tz=" + encodeURIComponent(mine); }
  }
  // Paint the schedule grid by dragging across cells (a click still toggles one).
  var painting = null;
  document.querySelectorAll("table.grid input[type=checkbox]:not(:disabled)").forEach(function (box) {
    box.addEventListener("mousedown", function (e) { painting = !box.checked; box.checked = painting; e.preventDefault(); });
    box.addEventListener("mouseenter", function () { if (painting !== null) { box.checked = painting; } });
    box.addEventListener("click", function (e) { e.preventDefault(); });
    box.addEventListener("keydown", function (e) { if (e.key === " ") { e.preventDefault(); box.checked = !box.checked; } });
  });
  document.addEventListener("mouseup", function () { painting = null; });
})();
