"""Plotly figures, built by plain functions from ``clusterui.telemetry.series`` data and
the snapshot: callable in tests without a request. Views pass ``common.to_json(fig)`` to
their templates; ``static/js/charts.js`` draws them."""
