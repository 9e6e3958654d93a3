// Package librdkafkatest runs librdkafka in Strand's end-to-end tests,
// through confluent-kafka for Python and the scripts in test/python, for
// test/compat and test/link.
//
// Python returns the python of the virtualenv that has confluent-kafka
// (STRAND_PY_VENV, by default ${XDG_CACHE_HOME:-$HOME/.cache}/strand-py,
// where .ci/run creates it; its wheel ships librdkafka), checked once per
// test binary. A missing virtualenv or module goes through
// testutil.Missing: the test skips, or fails under CI, which installs it.
// Debian's python3-kafka under /usr/bin/python3 is kafka-python, another
// library.
//
// GroupMember runs group_librdkafka.py, a consumer group member process
// (grouptest.ProcMember) whose standard output is test/grouptest's log.
// STRAND_LIBRDKAFKA_DEBUG sets librdkafka's debug contexts (cgrp,protocol,
// ...), logged to the member's stderr.
package librdkafkatest
