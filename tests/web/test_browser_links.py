"""Issue 19 in a real browser (Debian's chromium, headless), on the demo's simulated
cluster: a communication-bound job on NVLink shows its GPUs' NVLink traffic against the
capacity line on the job page and on its node's page, tensor and DRAM activity beside SM
activity; a node of A100s (no GPM) says its GPUs do not report them. Screenshots in
``test-output/screenshots/`` (job-links.png, node-links.png)."""

import pytest

from clusterui.inventory.models import Node
from clusterui.jobs.models import Job
from tests.web.test_browser import Tour, browser, demo  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(180)]

LINES = ".scatterlayer .trace"
CAPACITY = ".shapelayer path"


def test_link_traffic_and_gpm_activity_in_the_browser(demo, browser):  # noqa: F811
    job = Job.objects.filter(findings__kind="comm_bound",
                             findings__evidence__link="NVLink").first()
    assert job is not None, "the simulated cluster runs a job communication-bound on NVLink"
    gpus = job.allocations.count()
    tour = Tour(browser, demo, "admin")
    page = tour.page

    tour.visit(f"/jobs/{job.pk}/", charts=10)
    # Each GPU's receive and transmit, and one capacity line (the GPUs are alike).
    assert page.locator(f"#chart-nvlink {LINES}").count() == 2 * gpus
    assert page.locator(f"#chart-nvlink {CAPACITY}").count() == 1
    assert "NVLink capacity" in page.locator("#chart-nvlink .infolayer").text_content()
    for name in ("sm", "tensor", "dram", "pcie"):
        assert page.locator(f"#chart-{name} {LINES}").count() >= gpus, name
    tour.shot("job-links")

    node = job.allocations.first().gpu.node
    tour.visit(f"/nodes/{node.pk}/", charts=11)
    assert page.locator(f"#chart-nvlink {LINES}").count() == 2 * node.gpus.count()
    assert page.locator(f"#chart-nvlink {CAPACITY}").count() == 1
    tour.shot("node-links")
    # One legend entry per GPU; the hover names each GPU's receive and transmit lines.
    assert page.locator("#chart-nvlink .legend .traces").count() == node.gpus.count()
    page.locator("#chart-nvlink").scroll_into_view_if_needed()
    box = page.locator("#chart-nvlink .nsewdrag").first.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.97, box["y"] + box["height"] / 2)
    hover = page.locator("#chart-nvlink .hoverlayer")
    hover.locator("text").first.wait_for()
    assert "GPU 0 rx" in hover.text_content() and "GPU 0 tx" in hover.text_content()

    a100 = Node.objects.filter(gpus__model__contains="A100").distinct().first()
    assert a100 is not None, "the simulated cluster has a node of A100s"
    tour.visit(f"/nodes/{a100.pk}/")
    for name in ("tensor", "dram"):
        assert "Not reported" in page.locator(f"#chart-{name}").inner_text(), name
        assert page.locator(f"#chart-{name} {LINES}").count() == 0, name
    tour.shot("node-links-a100")

    assert tour.errors == []
    tour.context.close()
