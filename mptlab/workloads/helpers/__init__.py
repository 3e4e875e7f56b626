"""What the workloads share: endpoints and statistics (``common``), the host's
content cache (``content``), the HTTP/1.1 server and client (``httpd``), web
pages (``pages``), video (``media``) and the DASH player (``dash_player``)."""
