// Progressive enhancement only: every page works without this file (the grid is then a form of checkboxes).
(function () {
  "use strict";
  // The Fleet page reloads itself every minute, unless someone is typing into it.
  var refresh = parseInt(document.body.getAttribute("data-refresh") || "0", 10);
  if (refresh > 0) {
    setInterval(function () {
      var a = document.activeElement;
      if (!a || !/^(INPUT|SELECT|TEXTAREA)$/.test(a.tagName)) { location.reload(); }
    }, refresh * 1000);
  }
  // Fill in the viewer's timezone when the URL does not name one.
  var tz = document.getElementById("tz");
  if (tz && !tz.getAttribute("data-chosen") && !/[?&]tz=/.test(location.search) && window.Intl) {
    var mine = Intl.DateTimeFormat().resolvedOptions().timeZone;
    if (mine && mine !== tz.value) { location.search = "?tz=" + encodeURIComponent(mine); }
  }
  document.querySelectorAll("form.grid-form").forEach(setUpGrid);
  // A timeline wider than its box (a phone) opens with "now" in view, the recent past to its left.
  document.querySelectorAll(".timeline-wrap").forEach(function (wrap) {
    var now = wrap.querySelector("line.now");
    if (!now || wrap.scrollWidth <= wrap.clientWidth + 1) { return; }
    var box = now.getBoundingClientRect(), frame = wrap.getBoundingClientRect();
    wrap.scrollLeft += box.left - frame.left - wrap.clientWidth * 0.6;
  });
  // A grid wider than its box (a phone) opens an hour before its first running quarter, not on 00-06;
  // a grid with nothing running opens on the hour now.
  document.querySelectorAll(".scroll > table.grid").forEach(function (table) {
    var wrap = table.parentNode, rows = table.tBodies[0] ? table.tBodies[0].rows : [];
    if (!rows.length || wrap.scrollWidth <= wrap.clientWidth + 1) { return; }
    var first = 96;
    Array.prototype.forEach.call(rows, function (row) {
      for (var s = 0; s < Math.min(first, row.cells.length - 1); s++) {
        var cell = row.cells[s + 1], box = cell.querySelector("input");
        if (cell.classList.contains("on") || (box && box.checked)) { first = s; break; }
      }
    });
    if (first === 96) { first = new Date().getHours() * 4; }
    var target = rows[0].cells[Math.max(0, first - 4) + 1], head = rows[0].cells[0];
    if (!target) { return; }
    wrap.scrollLeft += target.getBoundingClientRect().left - wrap.getBoundingClientRect().left - head.getBoundingClientRect().width;
  });
  // Instants shown in UTC also get the viewer's own zone ("(Tue 8 Dec 14:00 GMT+9, your time)").
  document.querySelectorAll(".local-time[data-at]").forEach(function (el) {
    if (!window.Intl) { return; }
    var at = new Date(el.getAttribute("data-at"));
    if (isNaN(at.getTime())) { return; }
    var text = new Intl.DateTimeFormat("en-GB", {
      weekday: "short", day: "numeric", month: "short", hour: "2-digit", minute: "2-digit", hour12: false,
      timeZoneName: "short"
    }).format(at).replace(",", "");
    el.textContent = "(" + text + ", your time)";
  });

  function setUpGrid(form) {
    var table = form.querySelector("table.grid");
    var boxes = Array.prototype.slice.call(table.querySelectorAll("input[type=checkbox]:not(:disabled)"));
    if (!boxes.length) { return; }
    var SLOTS = 96, painting = null, active = 0;
    // Empty: a group has no price, so what a stopped hour saves is not known (said, never guessed).
    var hourlyText = form.getAttribute("data-hourly"), hourly = parseFloat(hourlyText || "0");
    // A flexible group priced at its dearest type: the figure is an upper bound.
    var about = form.hasAttribute("data-upper-bound") ? "up to" : "about";
    var out = form.querySelector(".hours");
    function box(d, s) { return boxes[d * SLOTS + s]; }
    function where(b) { var i = boxes.indexOf(b); return [Math.floor(i / SLOTS), i % SLOTS]; }
    // One tab stop for the whole grid (arrow keys move inside it), so the Save button is a few Tabs away.
    function focusAt(i, focus) {
      boxes[active].tabIndex = -1; active = Math.max(0, Math.min(boxes.length - 1, i));
      boxes[active].tabIndex = 0; if (focus) { boxes[active].focus(); }
    }
    boxes.forEach(function (b) { b.tabIndex = -1; });
    focusAt(0, false);
    function update() {
      var on = boxes.filter(function (b) { return b.checked; }).length;
      var running = on / 4, stopped = 168 - running;
      var pct = Math.round(100 * stopped / 168), idle = form.getAttribute("data-stops-nothing");
      var text = "running " + running + " h a week, stopped " + stopped + " h (" + pct + "%)";
      if (idle) {
        // Its clusters stop nothing (every group protected): the schedule's hours are not stopped hours.
        text = "running " + running + " h a week; the schedule would stop it " + stopped + " h (" + pct + "%), but " +
          idle + " stops nothing: every group with nodes is protected";
      } else if (hourlyText === "") { text += " · what a week not billed saves is not known (a group has no price)";
      } else if (hourly > 0) { text += " · " + about + " $" + Math.round(hourly * stopped).toLocaleString("en-US") + " a week not billed"; }
      if (out) { out.textContent = text; }
    }
    function set(b, value) { if (b.checked !== value) { b.checked = value; } }
    // Mouse, pen and touch alike: press to start, drag across cells to paint with the first cell's new value.
    table.addEventListener("pointerdown", function (e) {
      var b = e.target.closest ? e.target.closest("input[type=checkbox]") : null;
      if (!b || b.disabled) { return; }
      e.preventDefault(); painting = !b.checked; set(b, painting); focusAt(boxes.indexOf(b), true); update();
      if (table.setPointerCapture) { try { table.setPointerCapture(e.pointerId); } catch (err) { /* older browsers */ } }
    });
    table.addEventListener("pointermove", function (e) {
      if (painting === null) { return; }
      var el = document.elementFromPoint(e.clientX, e.clientY);
      if (el && el.tagName === "INPUT" && boxes.indexOf(el) >= 0) { set(el, painting); update(); }
    });
    function stop() { painting = null; }
    table.addEventListener("pointerup", stop); table.addEventListener("pointercancel", stop);
    document.addEventListener("pointerup", stop);
    table.addEventListener("click", function (e) { if (e.target.tagName === "INPUT") { e.preventDefault(); } });
    // Keyboard: arrows move, Space toggles, Shift+arrow paints the cell it moves to with the current value.
    table.addEventListener("keydown", function (e) {
      var b = e.target; if (boxes.indexOf(b) < 0) { return; }
      var pos = where(b), d = pos[0], s = pos[1], next = null;
      if (e.key === " " || e.key === "Enter") { e.preventDefault(); set(b, !b.checked); update(); return; }
      if (e.key === "ArrowRight") { next = [d, Math.min(SLOTS - 1, s + 1)]; }
      else if (e.key === "ArrowLeft") { next = [d, Math.max(0, s - 1)]; }
      else if (e.key === "ArrowDown") { next = [Math.min(6, d + 1), s]; }
      else if (e.key === "ArrowUp") { next = [Math.max(0, d - 1), s]; }
      else if (e.key === "Home") { next = [d, 0]; } else if (e.key === "End") { next = [d, SLOTS - 1]; }
      if (!next) { return; }
      e.preventDefault();
      var target = box(next[0], next[1]);
      if (e.shiftKey) { set(target, b.checked); update(); }
      focusAt(boxes.indexOf(target), true);
    });
    // Presets and copying a day.
    form.querySelectorAll("button[data-preset]").forEach(function (btn) {
      btn.addEventListener("click", function () {
        var p = btn.getAttribute("data-preset");
        for (var d = 0; d < 7; d++) {
          for (var s = 0; s < SLOTS; s++) {
            var on = p === "always" || (p === "weekdays" && d < 5) || (p === "office" && d < 5 && s >= 32 && s < 76);
            set(box(d, s), on);
          }
        }
        update();
      });
    });
    var copy = form.querySelector("button[data-copy]");
    if (copy) {
      copy.addEventListener("click", function () {
        var from = parseInt(form.querySelector("select[name=copy-from]").value, 10);
        var to = form.querySelector("select[name=copy-to]").value;
        var days = to === "weekdays" ? [0, 1, 2, 3, 4] : to === "all" ? [0, 1, 2, 3, 4, 5, 6] : [parseInt(to, 10)];
        days.forEach(function (d) { for (var s = 0; s < SLOTS; s++) { set(box(d, s), box(from, s).checked); } });
        update();
      });
    }
    form.querySelectorAll(".js-only").forEach(function (el) { el.hidden = false; });
    update();
  }
})();
