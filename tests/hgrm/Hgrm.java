// HdrHistogram's own (Java) .hgrm of an hlog: the untagged intervals (stampede's fleet-wide merge)
// added up, printed by outputPercentileDistribution with 5 ticks per half distance in milliseconds
// (the hlog holds microseconds). The reference tests/hgrm/check.py compares stampede's .hgrm with.
//
//   java -cp /usr/share/java/hdrhistogram.jar tests/hgrm/Hgrm.java step-001.hlog [TAG]
import java.io.File;
import org.HdrHistogram.EncodableHistogram;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.HistogramLogReader;

public class Hgrm {
    public static void main(String[] args) throws Exception {
        if (args.length < 1 || args.length > 2) {
            System.err.println("usage: Hgrm FILE.hlog [TAG]");
            System.exit(2);
        }
        String tag = args.length == 2 ? args[1] : null;
        HistogramLogReader reader = new HistogramLogReader(new File(args[0]));
        Histogram sum = null;
        EncodableHistogram e;
        while ((e = reader.nextIntervalHistogram()) != null) {
            if (!(e instanceof Histogram)) {
                throw new IllegalArgumentException("not an integer histogram: " + e.getClass());
            }
            Histogram h = (Histogram) e;
            boolean wanted = tag == null ? h.getTag() == null : tag.equals(h.getTag());
            if (!wanted) {
                continue;
            }
            // The first interval's shape (stampede's: 1 us to 1 h, 3 digits) is kept, so the
            // Buckets line is the recorded shape's, not a resized one's.
            if (sum == null) {
                sum = h.copy();
            } else {
                sum.add(h);
            }
        }
        if (sum == null) {
            System.err.println(args[0] + ": no " + (tag == null ? "untagged" : "Tag=" + tag) + " interval");
            System.exit(1);
        }
        sum.outputPercentileDistribution(System.out, 5, 1000.0);
    }
}
