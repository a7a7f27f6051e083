"""The web dashboard and the shareable HTML report (issue 8): pages and a JSON API over the same
library and state store as the CLI."""

from hyperpod_scheduler.web.app import create_app
from hyperpod_scheduler.web.report import render_report, write_html_report
from hyperpod_scheduler.web.service import Dashboard

__all__ = ["Dashboard", "create_app", "render_report", "write_html_report"]
