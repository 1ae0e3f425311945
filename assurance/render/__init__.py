"""Rendering: the HTML report, the trust-boundary diagram, and the helpers that keep them safe.

Entry points: :func:`assurance.render.html.write_report` (a :class:`~assurance.render.model.ReportModel`
to ``report.html``), :func:`assurance.render.diagram.dot_source`, and
:func:`assurance.render.adapter.report_model` (status engine evaluations to a report model).
"""
