"""Usage trends: GPU-hours, used GPU-hours and energy per user, account, partition,
cluster or Kubernetes namespace over days, weeks or months (``clusterui.web.trends``)."""

from django.conf import settings
from django.shortcuts import render

from clusterui.web import cluster_choice
from clusterui.web import trends as data
from clusterui.web.figures.trends import trend_bars
from clusterui.web.views.support import charts


def trends(request):
    """A researcher sees her own jobs' trends; staff the whole cluster's."""
    errors = []
    group = request.GET.get("by", "account" if request.user.is_staff else "partition")
    period = request.GET.get("period", "12w")
    metric = request.GET.get("metric", "gpu_hours")
    if group not in data.GROUPS:
        errors.append(f"by must be one of {', '.join(data.GROUPS)} (got {group!r})")
        group = "account"
    if period not in data.PERIODS:
        errors.append(f"period must be one of {', '.join(data.PERIODS)} (got {period!r})")
        period = "12w"
    if metric not in data.METRICS:
        errors.append(f"metric must be one of {', '.join(data.METRICS)} (got {metric!r})")
        metric = "gpu_hours"
    result = data.trends(request.user, group, period,
                         cluster=cluster_choice.known(request))
    context = {
        "trends": result,
        "group": group, "groups": data.GROUPS, "group_label": data.GROUPS[group],
        "period_label": data.PERIODS[period][0], "metric_label": data.METRICS[metric],
        "period": period, "periods": {k: v[0] for k, v in data.PERIODS.items()},
        "metric": metric, "metrics": data.METRICS,
        "columns": [result.label(p) for p in result.periods],
        "rows": [{"group": g, "cells": [g.by_period.get(p, {}).get(metric, 0.0)
                                        for p in result.periods]}
                 for g in result.groups],
        "totals": {m: result.total(m) for m in data.METRICS},
        "errors": errors,
        "hot_minutes": settings.RAW_HOT_MINUTES,
        # A new installation (or make demo's first minutes) has no closed hour rolled up yet.
        "trend_empty": ("No rolled-up GPU time in this period. An hour appears once it is "
                        f"rolled up, about {settings.RAW_HOT_MINUTES} min after it ends."),
        "charts": charts(trend=trend_bars(result, metric, data.METRICS[metric],
                                          top=data.TOP)),
    }
    return render(request, "web/trends.html", context, status=400 if errors else 200)
