// Opens each TIFF given on the command line with ImageJ's own reader and
// prints its calibration, one line per file: the voxel size, the unit and
// the physical position of pixel 0 along x, y and z (Calibration.getX and
// friends, which apply ImageJ's origin). Run as a single-file program:
//   java -Djava.awt.headless=true -cp ij.jar IJCalibration.java FILE...
import ij.ImagePlus;
import ij.io.Opener;
import ij.measure.Calibration;

public class IJCalibration {
    public static void main(String[] args) {
        for (String path : args) {
            ImagePlus imp = new Opener().openImage(path);
            if (imp == null) {
                System.out.println(path + " not opened");
                continue;
            }
            Calibration c = imp.getCalibration();
            System.out.printf("%s voxel=%.6g,%.6g,%.6g unit=%s at0=%.6g,%.6g,%.6g%n", path,
                c.pixelWidth, c.pixelHeight, c.pixelDepth, c.getUnit(), c.getX(0), c.getY(0), c.getZ(0));
        }
    }
}
