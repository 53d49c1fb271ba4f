// The MongoDB stand-in of `tidemark dev`: mongo-java-server's in-memory backend with its oplog
// (local.oplog.rs) enabled, which the bundled main class does not do. It reports wire version
// 13 (MongoDB 5.0) because current pymongo refuses servers older than 4.4; the server's own
// "5.0" constant still says 8. Run as a single source file: java -cp <jars> MongoStandIn.java
// <host> <port>.
import de.bwaldvogel.mongo.MongoServer;
import de.bwaldvogel.mongo.MongoVersion;
import de.bwaldvogel.mongo.backend.memory.MemoryBackend;
import java.util.List;

public class MongoStandIn {
    public static void main(String[] args) throws Exception {
        MemoryBackend backend = new MemoryBackend();
        backend.version(new MongoVersion() {
            public List<Integer> getVersionArray() { return List.of(5, 0, 0); }
            public int getWireVersion() { return 13; }
        });
        backend.enableOplog();
        MongoServer server = new MongoServer(backend);
        server.bind(args[0], Integer.parseInt(args[1]));
        Runtime.getRuntime().addShutdownHook(new Thread(server::shutdownNow));
        System.out.println("mongo stand-in listening on " + args[0] + ":" + args[1]);
        Thread.currentThread().join();
    }
}
