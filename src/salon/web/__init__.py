"""The operator's web server: health, metrics, the activity page, the configurator and
triggers from outside (``POST /bots/<name>/events``).

It reads and writes only through the store and the config directory, so one web process
serves a whole fleet of bot processes. ``salon.web.links`` (the signed links of the
Discord ``/activity`` command) imports nothing of Starlette, so a bot process that only
hands out links does not load the server.
"""
