import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.Properties;
import java.util.function.Function;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.common.utils.Exit;
import org.apache.kafka.common.utils.Time;

/**
 * Kafka's own {@code kafka-transactions} command, run again and again in one JVM: a JVM start per call
 * cost the tests about two seconds each. Each line on stdin is one command line (arguments separated by
 * tabs); the answer is the command's output, then a line {@code \u0000<exit status>}. The command's code
 * is Kafka's ({@code TransactionsCommand.execute}); only the process around it is this class.
 */
public final class KafkaToolServer {
    public static void main(String[] ignored) throws Exception {
        Class<?> command = Class.forName("org.apache.kafka.tools.TransactionsCommand");
        Method execute = command.getDeclaredMethod("execute", String[].class, Function.class, PrintStream.class, Time.class);
        execute.setAccessible(true);
        // The command ends with Exit.exit(status): end that one call instead of the JVM.
        Exit.setExitProcedure((status, message) -> {
            throw new ExitCalled(status);
        });
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream answer = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        String read;
        while ((read = in.readLine()) != null) {
            String line = read;
            ByteArrayOutputStream output = new ByteArrayOutputStream();
            int status = 0;
            try (PrintStream out = new PrintStream(output, true, StandardCharsets.UTF_8)) {
                Function<Object, Admin> admin = namespace -> Admin.create(adminConfig(line));
                execute.invoke(null, line.split("\t"), admin, out, Time.SYSTEM);
            } catch (InvocationTargetException failed) {
                if (failed.getCause() instanceof ExitCalled) {
                    status = ((ExitCalled) failed.getCause()).status;
                } else {
                    status = 1;
                    failed.getCause().printStackTrace(new PrintStream(output, true, StandardCharsets.UTF_8));
                }
            }
            answer.print(output.toString(StandardCharsets.UTF_8));
            answer.println("\u0000" + status);
        }
    }

    private static final class ExitCalled extends RuntimeException {
        final int status;

        ExitCalled(int status) {
            super("exit " + status, null, false, false);
            this.status = status;
        }
    }

    private static Properties adminConfig(String commandLine) {
        String[] args = commandLine.split("\t");
        Properties config = new Properties();
        for (int i = 0; i + 1 < args.length; i++) {
            if (args[i].equals("--bootstrap-server")) {
                config.put("bootstrap.servers", args[i + 1]);
            }
        }
        return config;
    }
}
