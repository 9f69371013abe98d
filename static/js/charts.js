/* ClusterUI charts and live pages.
 *
 * Charts: every element with data-figure="<id>" is drawn from the JSON in the
 * <script type="application/json" id="<id>"> the server rendered (Plotly figures built in
 * Python, clusterui/web/figures/). data-click="<url template ending in /0/>" makes a click
 * on a point open that URL with the point's customdata as the id.
 *
 * A chart's legend stands beside its plot (clusterui/web/figures/common.py). Where that
 * column would take more than a third of the chart (long names, a half-width card, a
 * phone) the legend goes above the plot in rows instead and the chart grows by them; a
 * window resized across that line redraws the charts it changed.
 *
 * Live pages (<main data-refresh="30">) re-read themselves every N seconds while visible
 * and swap in the new figures (Plotly.react: the user's zoom survives, layout.uirevision)
 * and the new [data-live] regions, without reloading the page or losing the scroll.
 */
(function () {
  "use strict";

  var CONFIG = {
    responsive: true,
    displaylogo: false,
    modeBarButtonsToRemove: ["lasso2d", "select2d", "autoScale2d", "toggleSpikelines"],
  };

  var NARROW_PX = 480;
  var LEGEND_ROW_PX = 20;

  // The names a chart's legend lists, and the width they take beside the plot: an entry is
  // its symbol and gaps (about 50 px) and its name (about 7 px a character at 11 px).
  function legendNames(fig) {
    return (fig.data || []).filter(function (trace) {
      return trace.showlegend !== false && trace.visible !== false && trace.name;
    }).map(function (trace) { return String(trace.name); });
  }

  function entryPx(names) {
    return 50 + 7 * Math.max.apply(null, names.map(function (n) { return n.length; }));
  }

  // Whether this chart's legend goes above its plot: a side legend that would take more
  // than a third of the chart's width, or any on a chart narrower than NARROW_PX.
  function legendAbove(fig, el) {
    var layout = fig.layout || {};
    var legend = layout.legend || {};
    var beside = layout.showlegend !== false && legend.orientation !== "h" &&
      (legend.x === undefined || legend.x >= 1);
    var names = legendNames(fig);
    if (!beside || names.length === 0 || el.clientWidth === 0) return false;
    return el.clientWidth < NARROW_PX || entryPx(names) > el.clientWidth / 3;
  }

  // The layout to draw with at this element's width: as the server wrote it, or with the
  // side legend in rows above the plot, the chart taller by those rows.
  function fitted(fig, el) {
    var layout = fig.layout || {};
    if (!legendAbove(fig, el)) return layout;
    var names = legendNames(fig);
    var perRow = Math.max(1, Math.floor((el.clientWidth - 16) / entryPx(names)));
    var out = Object.assign({}, layout);
    out.legend = Object.assign({}, layout.legend, {
      orientation: "h", x: 0, xanchor: "left", y: 1.02, yanchor: "bottom",
    });
    out.height = (layout.height || 260) + Math.ceil(names.length / perRow) * LEGEND_ROW_PX;
    return out;
  }

  function figureFrom(doc, id) {
    var script = doc.getElementById(id);
    return script ? JSON.parse(script.textContent) : null;
  }

  function bindClick(el) {
    var template = el.dataset.click;
    if (!template || el.dataset.clickBound) return;
    el.dataset.clickBound = "1";
    el.on("plotly_click", function (ev) {
      var point = ev.points && ev.points[0];
      var id = point && point.customdata;
      if (Array.isArray(id)) id = id[0];
      if (id === null || id === undefined || id === "" || Number.isNaN(id)) return;
      window.location.href = template.replace(/0\/$/, encodeURIComponent(id) + "/");
    });
  }

  function draw(el, doc) {
    var fig = figureFrom(doc || document, el.dataset.figure);
    if (!fig) return Promise.resolve();
    var fresh = !el.classList.contains("js-plotly-plot");
    var layout = fitted(fig, el);
    el.dataset.legendAbove = String(layout !== fig.layout);
    var done = fresh
      ? Plotly.newPlot(el, fig.data, layout, CONFIG)
      : Plotly.react(el, fig.data, layout, CONFIG);
    return done.then(function () { bindClick(el); });
  }

  function drawAll() {
    document.querySelectorAll("[data-figure]").forEach(function (el) { draw(el); });
  }

  // Plotly resizes each chart to its card (CONFIG.responsive); a chart whose legend
  // belongs elsewhere at its new width is redrawn with it moved.
  function setupResize() {
    var pending = null;
    window.addEventListener("resize", function () {
      window.clearTimeout(pending);
      pending = window.setTimeout(function () {
        document.querySelectorAll("[data-figure].js-plotly-plot").forEach(function (el) {
          var fig = figureFrom(document, el.dataset.figure);
          if (fig && el.dataset.legendAbove !== String(legendAbove(fig, el))) draw(el);
        });
      }, 150);
    });
  }

  function setupRangePicker() {
    // Delegated: live refreshes replace the pickers inside [data-live] regions.
    document.addEventListener("click", function (ev) {
      var button = ev.target.closest("[data-custom-toggle]");
      if (!button) return;
      var box = button.closest("form").querySelector(".custom-range");
      box.hidden = !box.hidden;
      button.setAttribute("aria-expanded", String(!box.hidden));
      if (!box.hidden) box.querySelector("input").focus();
    });
  }

  function swapIn(doc) {
    // Regions of text (KPIs, tables, findings): replace their content.
    document.querySelectorAll("[data-live]").forEach(function (el) {
      var next = doc.querySelector('[data-live="' + el.dataset.live + '"]');
      if (next) el.innerHTML = next.innerHTML;
    });
    // Charts: redraw in place; a chart that appeared or emptied is swapped whole.
    document.querySelectorAll('[id^="chart-"]').forEach(function (el) {
      var next = doc.getElementById(el.id);
      if (!next) return;
      var wasChart = el.hasAttribute("data-figure");
      var isChart = next.hasAttribute("data-figure");
      if (wasChart && isChart) {
        var script = document.getElementById(el.dataset.figure);
        var nextScript = doc.getElementById(next.dataset.figure);
        if (script && nextScript) script.textContent = nextScript.textContent;
        draw(el);
        return;
      }
      if (wasChart) Plotly.purge(el);
      var holder = document.createElement("div");
      holder.innerHTML = next.outerHTML;
      var replacement = holder.firstChild;
      el.replaceWith(replacement);
      if (isChart) {
        var old = document.getElementById(replacement.dataset.figure);
        var fresh = doc.getElementById(replacement.dataset.figure);
        if (old) old.textContent = fresh.textContent;
        else replacement.after(fresh.cloneNode(true));
        draw(replacement);
      }
    });
    // The fresh page's own time, written by the server in the page's time zone and format
    // (the browser's clock and locale would say "7:24:02 PM" where the page said 19:23:02).
    var stamp = document.querySelector("[data-updated]");
    var nextStamp = doc.querySelector("[data-updated]");
    if (stamp && nextStamp) stamp.textContent = nextStamp.textContent;
  }

  var refreshing = null;

  function refresh() {
    if (refreshing) return refreshing;
    refreshing = fetch(window.location.href, { credentials: "same-origin", headers: { "X-Live-Refresh": "1" } })
      .then(function (response) {
        if (response.redirected || !response.ok) return null; // signed out, or an error: keep what we have
        return response.text();
      })
      .then(function (html) {
        if (html) swapIn(new DOMParser().parseFromString(html, "text/html"));
      })
      .catch(function () { /* offline for a moment: try again next time */ })
      .finally(function () { refreshing = null; });
    return refreshing;
  }

  function setupRefresh() {
    var main = document.querySelector("main[data-refresh]");
    if (!main) return;
    var seconds = parseInt(main.dataset.refresh, 10);
    if (!(seconds > 0)) return;
    window.setInterval(function () {
      if (!document.hidden) refresh();
    }, seconds * 1000);
  }

  // For the browser tests (and the curious): refresh a live page now.
  window.ClusterUI = { refresh: refresh };

  document.addEventListener("DOMContentLoaded", function () {
    setupRangePicker();
    if (window.Plotly) {
      drawAll();
      setupResize();
    }
    setupRefresh();
  });
})();
