// Opens each TIFF given on the command line with ImageJ's own reader (what
// Fiji's File > Open uses for these files) and prints what ImageJ sees, one
// line per file, for check_views.py. Run as a single-file program:
//   java -Djava.awt.headless=true -cp ij.jar ImageJCheck.java FILE...
import ij.ImagePlus;
import ij.io.Opener;
import ij.measure.Calibration;
import ij.process.StackStatistics;

public class ImageJCheck {
    public static void main(String[] args) {
        for (String path : args) {
            ImagePlus imp = new Opener().openImage(path);
            if (imp == null) {
                System.out.println("{\"path\": \"" + path + "\", \"open\": false}");
                continue;
            }
            Calibration c = imp.getCalibration();
            StackStatistics s = new StackStatistics(imp);
            System.out.println("{\"path\": \"" + path + "\", \"open\": true"
                + ", \"bitDepth\": " + imp.getBitDepth()
                + ", \"width\": " + imp.getWidth() + ", \"height\": " + imp.getHeight()
                + ", \"channels\": " + imp.getNChannels() + ", \"slices\": " + imp.getNSlices()
                + ", \"frames\": " + imp.getNFrames()
                + ", \"voxel\": [" + c.pixelWidth + ", " + c.pixelHeight + ", " + c.pixelDepth + "]"
                + ", \"unit\": \"" + c.getUnit() + "\""
                + ", \"min\": " + s.min + ", \"max\": " + s.max + ", \"mean\": " + s.mean + "}");
        }
    }
}
