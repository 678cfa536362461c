# The types of __init__.py's lazy exports, for type checkers: an import per _EXPORTS entry.
# Written by `uv run python -m tests.support.faces`; tests/test_package_faces.py checks it.

from evopolicygym.benchmark.catalog import CORE16 as CORE16
from evopolicygym.benchmark.catalog import FAMILIES as FAMILIES
from evopolicygym.benchmark.catalog import FRONTIER as FRONTIER
from evopolicygym.benchmark.catalog import RANDOM_POLICY_DIR as RANDOM_POLICY_DIR
from evopolicygym.benchmark.catalog import SUITES as SUITES
from evopolicygym.benchmark.catalog import TASKS as TASKS
from evopolicygym.benchmark.catalog import CatalogEntry as CatalogEntry
from evopolicygym.benchmark.catalog import CatalogTask as CatalogTask
from evopolicygym.benchmark.catalog import Family as Family
from evopolicygym.benchmark.catalog import FirstStepOnly as FirstStepOnly
from evopolicygym.benchmark.catalog import Profile as Profile
from evopolicygym.benchmark.catalog import ReferenceScores as ReferenceScores
from evopolicygym.benchmark.catalog import SuiteMember as SuiteMember
from evopolicygym.benchmark.catalog import catalog_entry as catalog_entry
from evopolicygym.benchmark.catalog import family_installed as family_installed
from evopolicygym.benchmark.catalog import family_of_distribution as family_of_distribution
from evopolicygym.benchmark.catalog import install_command as install_command
from evopolicygym.benchmark.catalog import install_hint as install_hint
from evopolicygym.benchmark.catalog import pick_profile as pick_profile
from evopolicygym.benchmark.conformance import CheckResult as CheckResult
from evopolicygym.benchmark.conformance import ConformanceReport as ConformanceReport
from evopolicygym.benchmark.conformance import check_benchmark as check_benchmark
from evopolicygym.benchmark.contract import FAILURE_STATUSES as FAILURE_STATUSES
from evopolicygym.benchmark.contract import SUMMARY_TERMINATION as SUMMARY_TERMINATION
from evopolicygym.benchmark.contract import Artifact as Artifact
from evopolicygym.benchmark.contract import Benchmark as Benchmark
from evopolicygym.benchmark.contract import BenchmarkError as BenchmarkError
from evopolicygym.benchmark.contract import BenchmarkSpec as BenchmarkSpec
from evopolicygym.benchmark.contract import Environment as Environment
from evopolicygym.benchmark.contract import EpisodeRecord as EpisodeRecord
from evopolicygym.benchmark.contract import EpisodeSpec as EpisodeSpec
from evopolicygym.benchmark.contract import Feedback as Feedback
from evopolicygym.benchmark.contract import InvalidAction as InvalidAction
from evopolicygym.benchmark.contract import Step as Step
from evopolicygym.benchmark.contract import StepResult as StepResult
from evopolicygym.benchmark.contract import canonical_digest as canonical_digest
from evopolicygym.benchmark.gymnasium_adapter.adapter import (
    GymnasiumBenchmark as GymnasiumBenchmark,
)
from evopolicygym.benchmark.gymnasium_adapter.adapter import (
    make_gymnasium_benchmark as make_gymnasium_benchmark,
)
from evopolicygym.benchmark.gymnasium_adapter.environment import EpisodeEnd as EpisodeEnd
from evopolicygym.benchmark.gymnasium_adapter.environment import EpisodeTracker as EpisodeTracker
from evopolicygym.benchmark.gymnasium_adapter.environment import (
    GymnasiumEnvironment as GymnasiumEnvironment,
)
from evopolicygym.benchmark.gymnasium_adapter.environment import (
    default_termination as default_termination,
)
from evopolicygym.benchmark.gymnasium_adapter.scoring import domain_summary as domain_summary
from evopolicygym.benchmark.gymnasium_adapter.scoring import termination_of as termination_of
from evopolicygym.benchmark.gymnasium_adapter.spaces import describe_space as describe_space
from evopolicygym.benchmark.video import VIDEO_KEY as VIDEO_KEY
from evopolicygym.benchmark.video import FrameSampler as FrameSampler
from evopolicygym.benchmark.video import VideoOptions as VideoOptions
from evopolicygym.benchmark.video import encode_video as encode_video
from evopolicygym.benchmark.video import mp4_available as mp4_available
from evopolicygym.benchmark.video import video_suffix as video_suffix
from evopolicygym.policy import TensorValue as TensorValue
from evopolicygym.seeds import derive_seed as derive_seed
from evopolicygym.values import PolicyValueError as PolicyValueError
from evopolicygym.values import encode_value as encode_value
from evopolicygym.values import tensor_to_array as tensor_to_array

__all__ = [
    "CORE16",
    "FAILURE_STATUSES",
    "FAMILIES",
    "FRONTIER",
    "RANDOM_POLICY_DIR",
    "SUITES",
    "SUMMARY_TERMINATION",
    "TASKS",
    "VIDEO_KEY",
    "Artifact",
    "Benchmark",
    "BenchmarkError",
    "BenchmarkSpec",
    "CatalogEntry",
    "CatalogTask",
    "CheckResult",
    "ConformanceReport",
    "Environment",
    "EpisodeEnd",
    "EpisodeRecord",
    "EpisodeSpec",
    "EpisodeTracker",
    "Family",
    "Feedback",
    "FirstStepOnly",
    "FrameSampler",
    "GymnasiumBenchmark",
    "GymnasiumEnvironment",
    "InvalidAction",
    "PolicyValueError",
    "Profile",
    "ReferenceScores",
    "Step",
    "StepResult",
    "SuiteMember",
    "TensorValue",
    "VideoOptions",
    "canonical_digest",
    "catalog_entry",
    "check_benchmark",
    "default_termination",
    "derive_seed",
    "describe_space",
    "domain_summary",
    "encode_value",
    "encode_video",
    "family_installed",
    "family_of_distribution",
    "install_command",
    "install_hint",
    "make_gymnasium_benchmark",
    "mp4_available",
    "pick_profile",
    "tensor_to_array",
    "termination_of",
    "video_suffix",
]
