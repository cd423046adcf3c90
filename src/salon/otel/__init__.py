"""OpenTelemetry export of Salon's traces and the GenAI client metrics (the ``otel`` extra).

``spans`` turns a finished activation into spans and metric points (plain data, no SDK);
``export`` hands them to the OpenTelemetry SDK's OTLP exporters on a worker thread. Nothing
here is imported unless a bot's config has an ``otel:`` section: ``salon.app`` imports
``salon.otel.export`` only then.
"""
