import org.apache.cassandra.config.DatabaseDescriptor;
import org.apache.cassandra.db.Mutation;
import org.apache.cassandra.db.commitlog.CommitLogDescriptor;
import org.apache.cassandra.db.commitlog.CommitLogReadHandler;
import org.apache.cassandra.db.commitlog.CommitLogReader;
import org.apache.cassandra.db.partitions.PartitionUpdate;
import org.apache.cassandra.io.util.File;
import org.apache.cassandra.schema.Schema;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;

/** Cassandra's own CommitLogReader over segments: the anchor of bench/cassandra_reader.py. */
class CommitLogBench {
    static long mutations, rows;

    public static void main(String[] args) throws Exception {
        DatabaseDescriptor.toolInitialization();
        Schema.instance.loadFromDisk();
        ThreadMXBean tmx = ManagementFactory.getThreadMXBean();
        CommitLogReadHandler handler = new CommitLogReadHandler() {
            public boolean shouldSkipSegmentOnError(CommitLogReadException e) { return false; }
            public void handleUnrecoverableError(CommitLogReadException e) { throw new RuntimeException(e); }
            public void handleMutation(Mutation m, int size, int entryLocation, CommitLogDescriptor desc) {
                mutations++;
                for (PartitionUpdate u : m.getPartitionUpdates()) rows += u.rowCount() + (u.staticRow().isEmpty() ? 0 : 1);
            }
        };
        int runs = Integer.parseInt(args[0]);
        for (int r = 0; r <= runs; r++) {
            mutations = 0; rows = 0;
            long cpu0 = tmx.getCurrentThreadCpuTime();
            long t0 = System.nanoTime();
            CommitLogReader reader = new CommitLogReader();
            for (int i = 1; i < args.length; i++) reader.readCommitLogSegment(handler, new File(args[i]), false);
            double cpu = (tmx.getCurrentThreadCpuTime() - cpu0) / 1e9;
            double wall = (System.nanoTime() - t0) / 1e9;
            System.out.printf("{\"run\": %d, \"mutations\": %d, \"rows\": %d, \"cpu_s\": %.4f, \"wall_s\": %.4f}%n", r, mutations, rows, cpu, wall);
        }
        System.exit(0);
    }
}
