/* bitcase report: search, filters, collapsible argument tree, deep links. No network. */
(function () {
  "use strict";
  var root = document.documentElement;
  var data;
  try {
    data = JSON.parse(document.getElementById("report-data").textContent);
  } catch (e) {
    root.setAttribute("data-report-error", "report data unreadable");
    return;
  }
  var controls = document.getElementById("controls");
  var fText = document.getElementById("f-text");
  var fCategory = document.getElementById("f-category");
  var fStatus = document.getElementById("f-status");
  var fCount = document.getElementById("f-count");

  function tokens(el, name) {
    var v = el.getAttribute(name);
    return v ? v.split(" ") : [];
  }

  // One entry per tree row: its depth, tokens and (lazily) its lower-cased text.
  var trees = Array.prototype.map.call(document.querySelectorAll("ol.tree"), function (ol) {
    var rows = Array.prototype.map.call(ol.children, function (li) {
      return { el: li, depth: parseInt(li.getAttribute("data-depth"), 10) || 0,
               status: tokens(li, "data-status"), cats: tokens(li, "data-category"),
               tog: li.querySelector(":scope > .row > .tog"), text: null };
    });
    return { ol: ol, rows: rows };
  });
  var items = Array.prototype.map.call(
    document.querySelectorAll("tr[data-category], li.problem[data-category]"), function (el) {
      return { el: el, status: tokens(el, "data-status"), cats: tokens(el, "data-category"), text: null };
    });

  function textOf(entry) {
    if (entry.text === null) entry.text = entry.el.textContent.toLowerCase();
    return entry.text;
  }
  function matches(entry, f) {
    if (f.status && entry.status.indexOf(f.status) < 0) return false;
    if (f.category && entry.cats.indexOf(f.category) < 0) return false;
    if (f.text && textOf(entry).indexOf(f.text) < 0) return false;
    return true;
  }
  function currentFilter() {
    return { text: fText.value.trim().toLowerCase(), category: fCategory.value, status: fStatus.value };
  }

  function applyFilter() {
    var f = currentFilter();
    var active = !!(f.text || f.category || f.status);
    var shownNodes = 0, totalNodes = 0, shownItems = 0;
    trees.forEach(function (t) {
      var rows = t.rows, visible = new Uint8Array(rows.length), stack = [];
      for (var i = 0; i < rows.length; i++) {
        while (stack.length && rows[stack[stack.length - 1]].depth >= rows[i].depth) stack.pop();
        if (!active || matches(rows[i], f)) {
          visible[i] = 1;
          shownNodes++;
          // Keep the path to a match visible, so a hit is seen in its place in the argument.
          for (var k = stack.length - 1; k >= 0 && !visible[stack[k]]; k--) visible[stack[k]] = 2;
        }
        stack.push(i);
      }
      totalNodes += rows.length;
      for (var j = 0; j < rows.length; j++) {
        rows[j].el.classList.toggle("fh", !visible[j]);
        rows[j].el.classList.toggle("path", visible[j] === 2);
      }
    });
    items.forEach(function (it) {
      var ok = !active || matches(it, f);
      it.el.classList.toggle("fh", !ok);
      if (ok) shownItems++;
    });
    fCount.value = active ? (shownNodes + " of " + totalNodes + " nodes, " + shownItems + " of " +
      items.length + " evidence rows match") : "";
    root.setAttribute("data-visible-nodes", String(shownNodes));
    root.setAttribute("data-visible-items", String(shownItems));
  }

  function recomputeCollapse(t) {
    var hideBelow = Infinity;
    t.rows.forEach(function (r) {
      if (r.depth > hideBelow) { r.el.classList.add("ch"); return; }
      hideBelow = Infinity;
      r.el.classList.remove("ch");
      if (r.tog && r.tog.getAttribute("aria-expanded") === "false") hideBelow = r.depth;
    });
  }
  function setExpanded(r, expanded) {
    if (!r.tog) return;
    r.tog.setAttribute("aria-expanded", expanded ? "true" : "false");
    r.tog.setAttribute("aria-label", expanded ? "collapse" : "expand");
  }

  function reveal(id) {
    var target = id && document.getElementById(id);
    if (!target) return;
    trees.forEach(function (t) {
      var idx = -1;
      for (var i = 0; i < t.rows.length; i++) if (t.rows[i].el === target) { idx = i; break; }
      if (idx < 0) return;
      var minDepth = t.rows[idx].depth;
      for (var j = idx - 1; j >= 0 && minDepth > 0; j--) {
        if (t.rows[j].depth < minDepth) { setExpanded(t.rows[j], true); minDepth = t.rows[j].depth; }
      }
      recomputeCollapse(t);
    });
    if (target.classList.contains("fh")) {
      fText.value = ""; fCategory.value = ""; fStatus.value = "";
      applyFilter();
    }
    for (var p = target.parentElement; p; p = p.parentElement) {
      if (p.tagName === "DETAILS") p.open = true;
    }
    target.scrollIntoView({ block: "center" });
  }

  document.addEventListener("click", function (ev) {
    var el = ev.target;
    if (!(el instanceof Element)) return;
    if (el.classList.contains("tog")) {
      var li = el.closest("li.node");
      trees.forEach(function (t) {
        t.rows.forEach(function (r) {
          if (r.el === li) setExpanded(r, r.tog.getAttribute("aria-expanded") === "false");
        });
        recomputeCollapse(t);
      });
      return;
    }
    var act = el.getAttribute("data-act");
    if (!act) return;
    trees.forEach(function (t) {
      t.rows.forEach(function (r) {
        if (act === "expand-all") setExpanded(r, true);
        else if (act === "collapse-all") setExpanded(r, false);
      });
      recomputeCollapse(t);
    });
  });

  var timer = null;
  function scheduleFilter() {
    if (timer !== null) clearTimeout(timer);
    timer = setTimeout(function () { timer = null; applyFilter(); }, 120);
  }
  fText.addEventListener("input", scheduleFilter);
  fCategory.addEventListener("change", applyFilter);
  fStatus.addEventListener("change", applyFilter);
  document.getElementById("f-clear").addEventListener("click", function () {
    fText.value = ""; fCategory.value = ""; fStatus.value = "";
    applyFilter();
  });
  controls.addEventListener("submit", function (ev) { ev.preventDefault(); applyFilter(); });
  window.addEventListener("hashchange", function () { reveal(decodeURIComponent(location.hash.slice(1))); });

  controls.hidden = false;
  Array.prototype.forEach.call(document.querySelectorAll(".tree-tools"), function (el) { el.hidden = false; });
  applyFilter();
  if (location.hash) reveal(decodeURIComponent(location.hash.slice(1)));
  root.setAttribute("data-report-ready", String(data.scopes.length));
})();
