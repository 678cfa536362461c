"""The formats ``evopolicy export`` knows, by name."""

from __future__ import annotations

from evopolicygym.exporters.base import Exporter
from evopolicygym.exporters.dpo import DpoExporter
from evopolicygym.exporters.events import EventsExporter
from evopolicygym.exporters.programs import ProgramsExporter
from evopolicygym.exporters.rl import RlExporter
from evopolicygym.exporters.rollouts import RolloutsExporter
from evopolicygym.exporters.sft import DistillExporter, SftExporter

__all__ = ["EXPORTERS"]

EXPORTERS: dict[str, type[Exporter]] = {
    cls.name: cls
    for cls in (
        SftExporter,
        RlExporter,
        DpoExporter,
        DistillExporter,
        RolloutsExporter,
        ProgramsExporter,
        EventsExporter,
    )
}
