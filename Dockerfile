# Salon's container image. Its install step is scripts/install-runtime, which CI also runs
# on a clean machine (tests/test_install_runtime.py): there is no Docker engine there, so
# the script is what is tested, and this file only calls it.
#
#   docker build -t salon .
#   docker run -v ./config:/config:ro -v salon-data:/data -e OPENAI_API_KEY salon
#
# The config directory is mounted at /config; set `data_dir: /data` in it so the database
# and logs land on the volume. See docs/DEPLOYMENT.md.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    SALON_HOME=/opt/salon \
    SALON_BIN=/usr/local/bin \
    SALON_DATA=/data \
    SALON_USER=salon

COPY pyproject.toml README.md constraints.txt /tmp/salon-src/
COPY src /tmp/salon-src/src
COPY scripts/install-runtime /tmp/salon-src/scripts/install-runtime
RUN /tmp/salon-src/scripts/install-runtime && rm -rf /tmp/salon-src

USER salon
WORKDIR /data
VOLUME ["/data"]
# The web server (health, metrics, activity) listens on 8787 by default.
EXPOSE 8787
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["/opt/salon/venv/bin/python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8787/health', timeout=4)"]
CMD ["salon", "run", "/config"]
