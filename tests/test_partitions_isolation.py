"""A scatter-gather query on a partitioned stream judged as one transaction: 2 real servers on
127.0.0.1, slides and appends broadcast while queries run; every partition's history is fetched
from its server and `check_partitioned` merges each query's partition reads into one verdict."""
from __future__ import annotations

import threading

import pytest

from windowstore.clients import Client, FailedPrecondition
from windowstore.clients.partitioned import ClusterClient
from windowstore.store.partitions import StaticCluster, partition_name
from windowstore.txn.checker import check_partitioned
from windowstore.txn.kinds import Level

pytestmark = pytest.mark.slow  # servers in subprocesses

P, N, ROWS, SLIDES = 3, 3, 30, 25
CLUSTER_NODES = 2  # the `cluster` fixture (conftest.py): servers in its cluster


def test_scatter_gather_reads_are_one_read_of_slide_k(cluster):
    with ClusterClient(cluster.addresses) as cc:
        cc.create_stream("iso", {"ts": "int64", "src": "string", "v": "int64"}, subwindows=N, subwindow_ms=1000,
                         clock="manual", partitions=P, partition_by=["src"])
        done, errors, reads, answers, refused = threading.Event(), [], [], [], []

        def slider():
            try:
                with ClusterClient(cluster.addresses) as w:
                    for i in range(SLIDES):
                        w.append("iso", {"ts": [i * ROWS + j for j in range(ROWS)],
                                         "src": [f"k{(i + j) % 7}" for j in range(ROWS)], "v": [1] * ROWS},
                                 writer_id="loader", batch_id=i)
                        w.slide("iso")
            except Exception as e:  # reported by the test thread
                errors.append(e)
            finally:
                done.set()

        t = threading.Thread(target=slider)
        t.start()
        with ClusterClient(cluster.addresses) as q:
            while not done.is_set() or len(answers) < 5:
                try:
                    a = q.query("SELECT COUNT(*), SUM(v) FROM iso")
                except FailedPrecondition as e:
                    # refused, not answered: before every partition's first slide, or a partition
                    # slid k out of its window between the client picking k and reading it
                    if "has not sealed a slide yet" in str(e) or "have left the window" in str(e):
                        refused.append(e)
                        continue
                    raise
                answers.append(a)
                reads.append((f"sg{len(reads)}", a.slide,
                              {partition_name("iso", p): qid for p, qid in a.partition_queries.items()}))
        t.join()
        assert not errors, errors
        for a in answers:  # the window of slide k: the batches sealed by slides k-N+1 .. k
            assert a.rows == [(ROWS * min(a.slide + 1, N),) * 2]
        assert len({a.slide for a in answers}) >= 2  # queries ran across slides

        view = StaticCluster(tuple(cluster.addresses))
        histories = {}
        for p in range(P):
            with Client(view.addresses[view.owner("iso", p)]) as ws:
                histories[partition_name("iso", p)] = ws.history(partition_name("iso", p), limit=1_000_000)
        report = check_partitioned(histories, reads)
        assert report.errors == []
        assert len(report.verdicts) == len(reads)
        assert all(v.level == Level.AS_OF and v.reflects == k for v, (_, k, _) in zip(report.verdicts, reads))

        # the checker can fail: one query judged with another slide's read on partition 0
        x, y = next((x, y) for x in reads for y in reads if x[1] != y[1])
        swapped = (x[0], x[1], {**x[2], partition_name("iso", 0): y[2][partition_name("iso", 0)]})
        torn = check_partitioned(histories, [swapped])
        assert [v.level for v in torn.verdicts] == [Level.TORN]
        assert check_partitioned(histories, [(x[0], x[1] + 1, x[2])]).verdicts[0].level == Level.TORN
