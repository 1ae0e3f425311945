/* bitcase report: search, filters, collapsible argument tree, paged evidence index, deep links.
   Makes no network request. Builds evidence rows with textContent only: data never becomes markup. */
(function () {
  "use strict";
  var PAGE = 500;
  var root = document.documentElement;
  var data;
  try {
    data = JSON.parse(document.getElementById("report-data").textContent);
  } catch (e) {
    root.setAttribute("data-report-error", "report data unreadable");
    return;
  }
  var labels = data.category_labels;
  var controls = document.getElementById("controls");
  var fText = document.getElementById("f-text");
  var fCategory = document.getElementById("f-category");
  var fStatus = document.getElementById("f-status");
  var fCount = document.getElementById("f-count");

  function tokens(el, name) {
    var v = el.getAttribute(name);
    return v ? v.split(" ") : [];
  }
  function each(selector, fn) { return Array.prototype.map.call(document.querySelectorAll(selector), fn); }

  // One entry per tree row: its depth, tokens and (lazily) its lower-cased text.
  var trees = each("ol.tree", function (ol) {
    var rows = Array.prototype.map.call(ol.children, function (li) {
      var first = li.firstElementChild && li.firstElementChild.firstElementChild;  // div.row > button.tog
      return { el: li, depth: parseInt(li.getAttribute("data-depth"), 10) || 0,
               status: tokens(li, "data-status"), cats: tokens(li, "data-category"),
               tog: first && first.classList.contains("tog") ? first : null, text: null };
    });
    return { ol: ol, rows: rows };
  });
  // Rows of the server-drawn tables and the attention list.
  var items = each("tr[data-category], li.problem[data-category]", function (el) {
    return { el: el, status: tokens(el, "data-status"), cats: tokens(el, "data-category"), text: null };
  });
  // The evidence index of each scope: rows as data (parsed on first use), drawn a page at a time.
  var indexes = each("section.evidence-index", function (sec) {
    return { details: sec.querySelector("details"), tbody: sec.querySelector("tbody"),
             pager: sec.querySelector(".pager"), status: sec.querySelector(".page-status"),
             source: sec.querySelector("script.index-data"), rows: null, col: null, entries: null,
             matches: null, offset: 0, drawn: false };
  });
  function load(ix) {
    if (ix.rows === null) {
      var parsed = JSON.parse(ix.source.textContent), col = {};
      parsed.columns.forEach(function (name, i) { col[name] = i; });
      ix.rows = parsed.rows;
      ix.col = col;
    }
    return ix;
  }
  function tokensOf(status, isStale) {
    var t = [status];
    if (status === "fail" || status === "error") t.push("failed");
    if (isStale) t.push("stale");
    return t;
  }

  function textOf(entry) {
    if (entry.text === null) entry.text = entry.el.textContent.toLowerCase();
    return entry.text;
  }
  function matches(entry, f) {
    if (f.status && entry.status.indexOf(f.status) < 0) return false;
    if (f.category && entry.cats.indexOf(f.category) < 0) return false;
    if (f.text && (entry.text === null ? textOf(entry) : entry.text).indexOf(f.text) < 0) return false;
    return true;
  }
  function currentFilter() {
    return { text: fText.value.trim().toLowerCase(), category: fCategory.value, status: fStatus.value };
  }
  function indexEntries(ix) {
    if (ix.entries === null) {
      var c = ix.col;
      ix.entries = ix.rows.map(function (r) {
        return { status: tokensOf(r[c.status], r[c.is_stale]), cats: [r[c.category]],
                 text: [r[c.id], labels[r[c.category]] || r[c.category], r[c.status], r[c.obligation],
                        r[c.summary], r[c.producer]].join(" ").toLowerCase() };
      });
    }
    return ix.entries;
  }

  function longText(value, max) {
    var span = document.createElement("span");
    if (value.length <= max) { span.textContent = value; return span; }
    span.className = "long";
    span.appendChild(document.createTextNode(value.slice(0, max) + "\u2026 "));
    var button = document.createElement("button"), full = document.createElement("span");
    button.type = "button";
    button.className = "more-tog";
    button.setAttribute("aria-expanded", "false");
    button.textContent = "show all " + value.length + " characters";
    full.className = "full";
    full.hidden = true;
    full.textContent = value;
    span.appendChild(button);
    span.appendChild(full);
    return span;
  }
  function badgeEl(status) {
    var b = document.createElement("span");
    b.className = "badge st-" + status;
    b.textContent = status;
    return b;
  }
  function indexRow(ix, r) {
    var c = ix.col, tr = document.createElement("tr");
    tr.id = r[c.anchor];
    tr.setAttribute("data-category", r[c.category]);
    tr.setAttribute("data-status", tokensOf(r[c.status], r[c.is_stale]).join(" "));
    function cell(child) { var td = document.createElement("td"); td.appendChild(child); tr.appendChild(td); return td; }
    var code = document.createElement("code");
    code.appendChild(longText(r[c.id], 80));
    cell(code);
    cell(document.createTextNode(labels[r[c.category]] || r[c.category]));
    var st = cell(badgeEl(r[c.status]));
    if (r[c.is_stale]) { st.appendChild(document.createTextNode(" ")); st.appendChild(badgeEl("stale")); }
    cell(longText(r[c.obligation], 80));
    cell(longText(r[c.summary], 160));
    cell(document.createTextNode(r[c.produced_at]));
    cell(longText(r[c.producer], 60));
    return tr;
  }
  function drawIndex(ix) {
    var total = ix.matches === null ? ix.rows.length : ix.matches.length;
    var end = Math.min(total, ix.offset + PAGE), frag = document.createDocumentFragment();
    for (var i = ix.offset; i < end; i++) {
      frag.appendChild(indexRow(ix, ix.rows[ix.matches === null ? i : ix.matches[i]]));
    }
    ix.tbody.textContent = "";
    ix.tbody.appendChild(frag);
    ix.pager.hidden = total <= PAGE;
    ix.pager.querySelector("[data-page='-1']").disabled = ix.offset === 0;
    ix.pager.querySelector("[data-page='1']").disabled = end >= total;
    ix.status.value = total ? "items " + (ix.offset + 1) + "\u2013" + end + " of " + total +
      (ix.matches === null ? "" : " matching (of " + ix.rows.length + ")") : "no matching items";
    ix.drawn = true;
  }
  function filterIndex(ix, f, active) {
    ix.matches = null;
    if (active) {
      var entries = indexEntries(load(ix)), hits = [];
      for (var i = 0; i < entries.length; i++) if (matches(entries[i], f)) hits.push(i);
      ix.matches = hits;
    }
    ix.offset = 0;
    if (ix.details.open) drawIndex(load(ix)); else ix.drawn = false;
    return ix.matches !== null ? ix.matches.length : ix.rows !== null ? ix.rows.length : -1;
  }

  function applyFilter() {
    var f = currentFilter();
    var active = !!(f.text || f.category || f.status);
    var shownNodes = 0, totalNodes = 0, shownItems = 0, totalItems = items.length;
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
    var unknown = false;
    indexes.forEach(function (ix) {
      var n = filterIndex(ix, f, active);
      if (n < 0) { unknown = true; return; }  // not parsed yet and nothing to filter: counted when opened
      shownItems += n;
      totalItems += ix.rows.length;
    });
    fCount.value = active ? (shownNodes + " of " + totalNodes + " nodes, " + shownItems + " of " +
      totalItems + " evidence rows match") : "";
    root.setAttribute("data-visible-nodes", String(shownNodes));
    if (!unknown) root.setAttribute("data-visible-items", String(shownItems));
  }
  function clearFilter() {
    fText.value = ""; fCategory.value = ""; fStatus.value = "";
    applyFilter();
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

  // Draw the page of an evidence index that holds the row with this anchor, if any.
  function revealIndexRow(id) {
    indexes.forEach(function (ix) {
      load(ix);
      var at = -1, c = ix.col;
      for (var i = 0; i < ix.rows.length; i++) if (ix.rows[i][c.anchor] === id) { at = i; break; }
      if (at < 0) return;
      if (ix.matches !== null && ix.matches.indexOf(at) < 0) clearFilter();
      var pos = ix.matches === null ? at : ix.matches.indexOf(at);
      ix.offset = pos - (pos % PAGE);
      ix.details.open = true;
      drawIndex(ix);
    });
  }
  function reveal(id) {
    if (!id) return;
    if (!document.getElementById(id)) revealIndexRow(id);
    var target = document.getElementById(id);
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
    if (target.classList.contains("fh")) clearFilter();
    for (var p = target.parentElement; p; p = p.parentElement) {
      if (p.tagName === "DETAILS") p.open = true;
      if (p.hidden && p.classList.contains("nojs-show")) {
        p.hidden = false;
        var before = p.previousElementSibling;
        var button = before && (before.classList.contains("more-tog") ? before : before.querySelector(".more-tog"));
        if (button) button.setAttribute("aria-expanded", "true");
      }
    }
    target.scrollIntoView({ block: "center" });
  }

  document.addEventListener("click", function (ev) {
    var el = ev.target;
    if (!(el instanceof Element)) return;
    if (el.classList.contains("more-tog")) {
      // Shows or hides what follows the button (or, at the end of a tree row, the row).
      var more = el.nextElementSibling || el.parentElement.nextElementSibling;
      var open = el.getAttribute("aria-expanded") !== "true";
      if (more) more.hidden = !open;
      el.setAttribute("aria-expanded", open ? "true" : "false");
      return;
    }
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
    var page = el.getAttribute("data-page");
    if (page) {
      indexes.forEach(function (ix) {
        if (ix.pager.contains(el)) { ix.offset = Math.max(0, ix.offset + parseInt(page, 10) * PAGE); drawIndex(ix); }
      });
      return;
    }
    var act = el.getAttribute("data-act");
    if (!act) return;
    trees.forEach(function (t) {
      t.rows.forEach(function (r) { setExpanded(r, act === "expand-all"); });
      recomputeCollapse(t);
    });
  });
  indexes.forEach(function (ix) {
    ix.details.addEventListener("toggle", function () { if (ix.details.open && !ix.drawn) drawIndex(load(ix)); });
  });

  var timer = null;
  function scheduleFilter() {
    if (timer !== null) clearTimeout(timer);
    timer = setTimeout(function () { timer = null; applyFilter(); }, 150);
  }
  fText.addEventListener("input", scheduleFilter);
  fCategory.addEventListener("change", applyFilter);
  fStatus.addEventListener("change", applyFilter);
  document.getElementById("f-clear").addEventListener("click", clearFilter);
  controls.addEventListener("submit", function (ev) { ev.preventDefault(); applyFilter(); });
  window.addEventListener("hashchange", function () { reveal(decodeURIComponent(location.hash.slice(1))); });

  controls.hidden = false;
  each(".tree-tools", function (el) { el.hidden = false; });
  if (location.hash) reveal(decodeURIComponent(location.hash.slice(1)));
  root.setAttribute("data-report-ready", String(data.scopes.length));
})();
