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
    private static final long SETTLE_SECONDS = 60;

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
        long deadline = System.nanoTime() + SETTLE_SECONDS * 1_000_000_000L;
        for (int attempt = 0; ; attempt++) {
            Exception failure;
            try {
                client.putObject(request, RequestBody.fromBytes(bytes));
                return;
            } catch (S3Exception e) {
                int status = e.statusCode();
                if (status == 412) {
                    // another writer's N.json, or ours: the client retries a PUT whose answer it
                    // lost, and the retry finds the object the first attempt made
                    Boolean ours = owner(client, bucket, key, writeId);
                    if (ours != null) {
                        if (ours) {
                            return;
                        }
                        throw exists(path, e);
                    }
                } else if (status != 409 && status < 500) {
                    // a definite refusal (403, 400...): nothing was written
                    throw new IOException("commit " + path + " refused by the store: " + e.getMessage(), e);
                }
                failure = e;  // 409: another PUT of this key in flight; 5xx: the store failed
            } catch (SdkException e) {
                failure = e;  // no answer: the PUT may have landed
            }
            // no verdict: ours may have landed. Look; else send the same PUT (same write id) again
            Boolean ours = owner(client, bucket, key, writeId);
            if (ours != null) {
                if (ours) {
                    return;
                }
                throw exists(path, failure);
            }
            if (System.nanoTime() > deadline) {
                throw new IOException("commit " + path + ": outcome unknown after " + SETTLE_SECONDS
                    + "s of attempts (" + failure.getMessage() + "); the object may still appear", failure);
            }
            pause(attempt);
        }
    }

    /** Whether the object is there and this write's (TRUE), another's (FALSE), or not there or
     *  not knowable now (null). */
    private static Boolean owner(S3Client client, String bucket, String key, String writeId) {
        HeadObjectResponse head;
        try {
            head = client.headObject(b -> b.bucket(bucket).key(key));
        } catch (NoSuchKeyException missing) {
            return null;
        } catch (SdkException e) {
            return null;  // 404, or the store not answering: decided by the next attempt
        }
        return writeId.equals(head.metadata().get(WRITE_ID));
    }

    private static FileAlreadyExistsException exists(Path path, Exception cause) {
        FileAlreadyExistsException e = new FileAlreadyExistsException(path.toString());
        e.initCause(cause);
        return e;
    }

    private static void pause(int attempt) throws InterruptedIOException {
        try {
            Thread.sleep(Math.min(1000L, 20L << Math.min(attempt, 10)));
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
