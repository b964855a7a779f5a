"""Running Brain as a service: the process supervisor behind `make run`, the worker launcher
that survives killed pool processes, the web app's behaviour while the database is away, request
logging, and the ASGI body buffer that keeps slow clients off the thread pool."""
