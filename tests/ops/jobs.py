"""A background job for the scale-out test: records which worker cluster ran it."""

import os
import time

from django.db import connection


def record_run(name: str) -> None:
    time.sleep(0.05)  # long enough that both clusters get a share
    with connection.cursor() as cursor:
        # A pool process's parent is its cluster's sentinel.
        cursor.execute("INSERT INTO ops_job_run (name, sentinel) VALUES (%s, %s)", [name, os.getppid()])
