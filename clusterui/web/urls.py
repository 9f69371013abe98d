from django.urls import path

from clusterui.gpuhealth.views import drain_list
from clusterui.web.views import (
    compare,
    fabric,
    favicon,
    findings,
    gpus,
    health,
    history,
    job_link,
    jobs,
    node_list,
    nodes,
    overview,
    trends,
    users,
)

# These names are linked to from emails and other apps: keep them stable.
urlpatterns = [
    path("", overview.home, name="home"),
    path("healthz", health.healthz, name="healthz"),
    path("favicon.ico", favicon.favicon, name="favicon"),
    path("nodes/", node_list.node_list, name="nodes"),
    path("nodes/history/", history.node_history, name="node-history"),
    path("nodes/drain/", drain_list, name="drain-list"),
    path("nodes/<int:pk>/", nodes.node_detail, name="node-detail"),
    path("fabric/", fabric.fabric, name="fabric"),
    path("gpus/<int:pk>/", gpus.gpu_detail, name="gpu-detail"),
    path("jobs/", jobs.job_list, name="jobs"),
    path("jobs/<int:pk>/", jobs.job_detail, name="job-detail"),
    path("jobs/compare/", compare.job_compare, name="job-compare"),
    # Open OnDemand and other sites link here by the scheduler's own job id.
    path("jobs/<str:scheduler>/<str:cluster>/<str:jobid>/", job_link.job_by_scheduler_id,
         name="job-by-scheduler-id"),
    path("users/", users.usage, name="users"),
    path("namespaces/", users.namespaces, name="namespaces"),
    path("trends/", trends.trends, name="trends"),
    path("findings/", findings.finding_list, name="findings"),
    path("findings/<int:pk>/ack/", findings.acknowledge, name="finding-ack"),
]
