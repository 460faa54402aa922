"""Micro-models (paper Eq. 1): metric functions ∘ PDFs over a class vocabulary V_c.

User code extends the registries without editing nslm: :func:`register_metric` and
:func:`register_pdf` (see ``docs/micro-models.md``).
"""

from nslm.micro.classdata import Candidates, ClassData, builtin_class, regex_class
from nslm.micro.history import CONTEXT_MODES, Context, previous_index
from nslm.micro.metrics import Metric, get_metric, metric_names, register_metric
from nslm.micro.model import MicroModel
from nslm.micro.pdfs import Pdf, get_pdf, pdf_names, register_pdf

__all__ = [
    "CONTEXT_MODES",
    "Candidates",
    "ClassData",
    "Context",
    "Metric",
    "MicroModel",
    "Pdf",
    "builtin_class",
    "get_metric",
    "get_pdf",
    "metric_names",
    "pdf_names",
    "previous_index",
    "regex_class",
    "register_metric",
    "register_pdf",
]
