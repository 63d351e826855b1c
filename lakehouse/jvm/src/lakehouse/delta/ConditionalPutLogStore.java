package lakehouse.delta;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.util.Collections;
import java.util.Iterator;
import java.util.UUID;

import io.delta.storage.HadoopFileSystemLogStore;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.s3a.S3AFileSystem;
import software.amazon.awssdk.core.exception.SdkException;
import software.amazon.awssdk.core.sync.RequestBody;
import software.amazon.awssdk.services.s3.S3Client;
import software.amazon.awssdk.services.s3.model.HeadObjectResponse;
import software.amazon.awssdk.services.s3.model.NoSuchKeyException;
import software.amazon.awssdk.services.s3.model.PutObjectRequest;
import software.amazon.awssdk.services.s3.model.S3Exception;

/**
 * A Delta LogStore for S3 and S3-compatible stores that cannot lose a commit to a concurrent
 * writer in another process or on another machine: commit N is one PUT of {@code N.json} with
 * {@code If-None-Match: *}, which the store lets exactly one writer win; the others get 412 and
 * Delta sees a FileAlreadyExistsException (a conflict it resolves and retries, as on HDFS).
 * Delta 4.0's own S3SingleDriverLogStore checks "does N.json exist" and then PUTs, so two
 * drivers that commit N at once both succeed and the second silently replaces the first.
 *
 * The PUT goes through the S3A filesystem's own client (its endpoint, region, path style and
 * credentials). A PUT refused or without an answer (a timeout after the request left, or the
 * client's own retry of it refused because the first attempt landed) is settled by reading the
 * object back: it carries this write's id in its metadata when this writer made it.
 * Reads and listings are Hadoop's (S3 lists consistently since 2020).
 */
public class ConditionalPutLogStore extends HadoopFileSystemLogStore {
    private static final String WRITE_ID = "lakehouse-write-id";
    private static final int IN_FLIGHT_RETRIES = 8;

    public ConditionalPutLogStore(Configuration hadoopConf) {
        super(hadoopConf);
    }

    @Override
    public void write(Path path, Iterator<String> actions, Boolean overwrite, Configuration hadoopConf)
            throws IOException {
        FileSystem fs = path.getFileSystem(hadoopConf);
        StringBuilder body = new StringBuilder();
        while (actions.hasNext()) {
            body.append(actions.next()).append('\n');
        }
        byte[] bytes = body.toString().getBytes(StandardCharsets.UTF_8);
        if (overwrite) {  // _last_checkpoint and the like: a whole PUT replaces the object
            try (FSDataOutputStream out = fs.create(path, true)) {
                out.write(bytes);
            }
            return;
        }
        if (!(fs instanceof S3AFileSystem)) {
            throw new IOException("ConditionalPutLogStore needs the S3A filesystem for " + path
                + " (found " + fs.getClass().getName() + ")");
        }
        S3AFileSystem s3a = (S3AFileSystem) fs;
        S3Client client = s3a.getS3AInternals().getAmazonS3Client("lakehouse delta commit");
        String bucket = s3a.getBucket();
        String key = s3a.pathToKey(s3a.makeQualified(path));
        String writeId = UUID.randomUUID().toString();
        PutObjectRequest request = PutObjectRequest.builder()
            .bucket(bucket).key(key)
            .metadata(Collections.singletonMap(WRITE_ID, writeId))
            .contentType("application/json")
            .overrideConfiguration(o -> o.putHeader("If-None-Match", "*"))
            .build();
        for (int attempt = 0; ; attempt++) {
            Exception failure;
            try {
                client.putObject(request, RequestBody.fromBytes(bytes));
                return;
            } catch (S3Exception e) {
                // 412: another writer's N.json, or ours: the client retries a PUT whose answer
                // it lost, and the retry finds the object the first attempt made (settled below)
                if (e.statusCode() == 409 && attempt < IN_FLIGHT_RETRIES) {
                    pause(attempt);  // another writer's conditional PUT of this key is in flight
                    continue;
                }
                failure = e;
            } catch (SdkException e) {
                failure = e;
            }
            IOException outcome = settle(client, bucket, key, writeId, path, failure);
            if (outcome == null) {
                return;  // the PUT landed; only its answer was lost
            }
            throw outcome;
        }
    }

    /** After a PUT that failed without a verdict: null (done) if our object is there, a conflict
     *  if another's is, else the failure as an IOException. */
    private static IOException settle(S3Client client, String bucket, String key, String writeId,
                                      Path path, Exception failure) {
        HeadObjectResponse head;
        try {
            head = client.headObject(b -> b.bucket(bucket).key(key));
        } catch (NoSuchKeyException missing) {
            return new IOException("commit " + path + " not written: " + failure.getMessage(), failure);
        } catch (S3Exception probe) {
            if (probe.statusCode() == 404) {
                return new IOException("commit " + path + " not written: " + failure.getMessage(), failure);
            }
            return new IOException("commit " + path + ": outcome unknown (" + failure.getMessage()
                + "); the store could not be asked: " + probe.getMessage(), failure);
        }
        if (writeId.equals(head.metadata().get(WRITE_ID))) {
            return null;
        }
        return exists(path, failure);
    }

    private static FileAlreadyExistsException exists(Path path, Exception cause) {
        FileAlreadyExistsException e = new FileAlreadyExistsException(path.toString());
        e.initCause(cause);
        return e;
    }

    private static void pause(int attempt) throws InterruptedIOException {
        try {
            Thread.sleep(Math.min(1000L, 20L << attempt));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new InterruptedIOException("interrupted while another commit was in flight");
        }
    }

    @Override
    public Boolean isPartialWriteVisible(Path path, Configuration hadoopConf) {
        return false;  // a PUT is all or nothing
    }
}
