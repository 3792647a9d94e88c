"""What ``xmc serve`` lets one request and one connection take (:class:`Limits`): read by the
server (:mod:`xmc_core.serving.http`) and by the request-body parser
(:mod:`xmc_core.serving.bodies`)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from xmc_core.errors import XmcError

if TYPE_CHECKING:
    from xmc_core.config import ServeConfig


@dataclass(frozen=True)
class Limits:
    """What one request may ask for (beyond it: 413 or 422) and what a connection may take:
    seconds to send the request head and body (then 408 / closed), open connections (then 503).

    The values of :class:`~xmc_core.config.ServeConfig` (the defaults live there), possibly
    overridden on the command line: :meth:`check_defaults` checks them before serving.
    """

    max_texts: int
    max_body_bytes: int
    max_topk: int
    max_beam_size: int
    header_timeout_s: float
    body_timeout_s: float
    max_connections: int

    @classmethod
    def from_config(cls, cfg: ServeConfig, **given: Any) -> Limits:
        """The limits of ``cfg``, with the ``given`` fields replaced (e.g. command-line flags)."""
        values = {f.name: getattr(cfg, f.name) for f in fields(cls)}
        return cls(**(values | given))

    def check_defaults(self, topk: int | None, beam_size: int | None) -> None:
        """Refuse server defaults that every request would be refused for (or stuck on)."""
        for name, value, most in (
            ("topk", topk, self.max_topk),
            ("beam_size", beam_size, self.max_beam_size),
        ):
            if value is not None and not 1 <= value <= most:
                raise XmcError(f"{name}={value} is out of range\n  fix: pass 1 to {most}")
        for name, seconds in (
            ("header timeout", self.header_timeout_s),
            ("body timeout", self.body_timeout_s),
        ):
            if not 0 < seconds <= 3600:
                raise XmcError(f"{name} of {seconds} s is out of range\n  fix: pass 0.1 to 3600")
        if not 1 <= self.max_connections <= 10_000:
            raise XmcError(
                f"max_connections={self.max_connections} is out of range\n  fix: pass 1 to 10000"
            )
