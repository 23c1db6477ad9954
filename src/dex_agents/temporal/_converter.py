"""The data converter of every dex-agents client and worker.

It is `temporalio.contrib.pydantic`'s converter with one difference: the
pydantic TypeAdapter cache is shared by the whole process. Temporal builds a new
payload converter for every workflow instance, so the stock converter rebuilt
every schema for every cached session; `make bench` measured about 288 KB of
worker memory per cached session with it, 51–54 KB with the shared cache.
"""

from __future__ import annotations

from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    JSONPlainPayloadConverter,
)

_SHARED_JSON = PydanticJSONPlainPayloadConverter()


class SharedPydanticPayloadConverter(CompositePayloadConverter):
    """Pydantic JSON payloads, with one TypeAdapter cache per process."""

    def __init__(self) -> None:
        super().__init__(
            *(
                _SHARED_JSON if isinstance(c, JSONPlainPayloadConverter) else c
                for c in DefaultPayloadConverter.default_encoding_payload_converters
            )
        )


data_converter = DataConverter(payload_converter_class=SharedPydanticPayloadConverter)
"""Pass it as `data_converter=` to a `temporalio.client.Client` of your own."""
